"""A 422 names the run and its file relative to the logdir, never the server's absolute path
(issue 30, item 7).  A real Nsight Systems run with one table and then its manifest damaged."""
import gzip
import shutil

from tb_hwprof.app.cli import main

from conftest import sample
from support_plugin import P, App, body

NSYS = "nsys/annikola_gtx1050_2024.5.1.sqlite"


def test_a_damaged_run_is_named_relative_to_the_logdir(samples_dir, tmp_path):
    logdir = tmp_path / "srv" / "logs"
    assert main(["export", str(sample(samples_dir, NSYS)), "--logdir", str(logdir), "--run", "n", "--quiet"]) == 0
    assets = logdir / "n" / "plugins" / "tb_hwprof"
    table = next(assets.glob("summary_*.json.gz"))
    table.write_bytes(gzip.compress(b"{not json"))
    name = table.name[len("summary_"):-len(".json.gz")]
    app = App(logdir)
    response = app.get(P + "/summary", run="n", name=name)
    text = body(response).decode()
    assert response.status_code == 422, text
    assert f"n/plugins/tb_hwprof/{table.name}" in text
    assert str(tmp_path) not in text and "/srv/" not in text
    # The manifest itself: the run's listing says what is wrong, relative too.
    copy = logdir / "m"
    shutil.copytree(logdir / "n", copy)
    (copy / "plugins" / "tb_hwprof" / "profile.json").write_text("{not json")
    app = App(logdir)
    response = app.get(P + "/kernels", run="m")
    text = body(response).decode()
    assert response.status_code == 422, text
    assert "m/plugins/tb_hwprof/profile.json" in text and str(tmp_path) not in text
