"""A small GPT-style decoder trained on random tokens: bf16 autocast, AdamW, scaled-dot-product
attention (cuDNN / flash kernels), 6 optimizer steps."""
import torch


class Block(torch.nn.Module):
    def __init__(self, width: int, heads: int):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = torch.nn.LayerNorm(width), torch.nn.LayerNorm(width)
        self.qkv, self.proj = torch.nn.Linear(width, 3 * width), torch.nn.Linear(width, width)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(width, 4 * width), torch.nn.GELU(), torch.nn.Linear(4 * width, width))

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        attention = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attention.transpose(1, 2).reshape(b, t, c))
        return x + self.mlp(self.norm2(x))


class GPT(torch.nn.Module):
    def __init__(self, vocab: int = 8192, width: int = 512, heads: int = 8, layers: int = 2, context: int = 256):
        super().__init__()
        self.embed, self.position = torch.nn.Embedding(vocab, width), torch.nn.Embedding(context, width)
        self.blocks = torch.nn.Sequential(*[Block(width, heads) for _ in range(layers)])
        self.norm, self.head = torch.nn.LayerNorm(width), torch.nn.Linear(width, vocab, bias=False)

    def forward(self, tokens):
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        return self.head(self.norm(self.blocks(self.embed(tokens) + self.position(positions))))


def main(steps: int = 6, batch: int = 16, context: int = 256):
    torch.manual_seed(0)
    net = GPT(context=context).cuda()
    opt = torch.optim.AdamW(net.parameters(), lr=3e-4)
    tokens = torch.randint(0, 8192, (batch, context + 1), device="cuda")
    for step in range(steps):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = net(tokens[:, :-1])
            loss = torch.nn.functional.cross_entropy(logits.float().view(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        print(f"step {step} loss {loss.item():.3f}", flush=True)


if __name__ == "__main__":
    main()
