"""A small CNN trained on synthetic images (the GPU check's program): bf16 autocast, channels_last,
SGD with momentum, 6 optimizer steps.  No DataLoader workers: the check profiles one process."""
import torch


def model():
    layers = []
    channels = 3
    for width in (32, 64, 128):
        layers += [torch.nn.Conv2d(channels, width, 3, padding=1, bias=False), torch.nn.BatchNorm2d(width),
                   torch.nn.ReLU(inplace=True), torch.nn.MaxPool2d(2)]
        channels = width
    layers += [torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(channels, 100)]
    return torch.nn.Sequential(*layers)


def main(steps: int = 6, batch: int = 64):
    torch.manual_seed(0)
    net = model().cuda().to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    x = torch.randn(batch, 3, 64, 64, device="cuda").to(memory_format=torch.channels_last)
    y = torch.randint(0, 100, (batch,), device="cuda")
    for step in range(steps):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = loss_fn(net(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        print(f"step {step} loss {loss.item():.3f}", flush=True)


if __name__ == "__main__":
    main()
