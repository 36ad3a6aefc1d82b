"""Import coverage: small models of common architectures (transformers' GPT-2, RoBERTa, T5
encoder, DistilBERT, BERT (SDPA), Llama (eager attention), ViT, Swin, SegFormer, ConvNeXt,
MobileViT, ResNet, MobileNet-V2, wav2vec2; and torch modules with MobileNet-V3, U-Net, GPT,
1-d audio and sub-pixel decoder blocks), random weights, exported to ONNX by torch, imported
with ``tc.from_onnx`` in both layouts, compiled with default schedules and compared with ONNX
Runtime on one random input. Correctness only: no timing.

    benchmarks/run.sh model_coverage.py [--only NAME ...]

Prints one line per model and layout: the relative error against ONNX Runtime, or the
exception; exits non-zero if any model fails.
"""
import argparse
import io
import sys
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import torch
import torch.nn as nn
import torch.nn.functional as F

import tecomp as tc

warnings.filterwarnings("ignore")


class MNv3Block(nn.Module):
    def __init__(s):
        super().__init__()
        s.c1, s.bn, s.act = nn.Conv2d(3, 16, 3, 2, 1), nn.BatchNorm2d(16), nn.Hardswish()
        s.dw = nn.Conv2d(16, 16, 3, 1, 1, groups=16)
        s.se1, s.se2, s.hs, s.fc = nn.Conv2d(16, 8, 1), nn.Conv2d(8, 16, 1), nn.Hardsigmoid(), \
            nn.Linear(16, 10)

    def forward(s, x):
        x = s.act(s.bn(s.c1(x)))
        y = s.dw(x)
        se = s.hs(s.se2(F.relu(s.se1(F.adaptive_avg_pool2d(y, 1)))))
        return F.log_softmax(s.fc((y * se).mean((2, 3))), dim=1)


class UNetBlock(nn.Module):
    def __init__(s):
        super().__init__()
        s.d, s.u, s.o = nn.Conv2d(3, 8, 3, 2, 1), nn.Conv2d(8, 8, 3, 1, 1), nn.Conv2d(11, 4, 1)
        s.gn, s.inorm = nn.GroupNorm(2, 8), nn.InstanceNorm2d(8, affine=True)
        s.up = nn.ConvTranspose2d(8, 8, 4, 2, 1)

    def forward(s, x):
        y = F.leaky_relu(s.gn(s.d(x)), 0.2)
        y = F.interpolate(y, scale_factor=2, mode="bilinear", align_corners=False)
        y = F.elu(s.inorm(s.u(y)))
        y = F.interpolate(s.up(y), size=(x.shape[2], x.shape[3]), mode="nearest")
        return s.o(torch.cat([y, x], 1))


class AudioBlock(nn.Module):
    def __init__(s):
        super().__init__()
        s.c, s.gn = nn.Conv1d(1, 8, 10, 5), nn.GroupNorm(8, 8)
        s.c2, s.p = nn.Conv1d(8, 8, 3, 2, padding=1), nn.MaxPool1d(2)

    def forward(s, x):
        y = F.mish(s.c2(F.gelu(s.gn(s.c(x)))))
        return F.softplus(s.p(y)) + F.selu(s.p(y))


class SubPixel(nn.Module):
    def __init__(s):
        super().__init__()
        s.c, s.ps, s.pr = nn.Conv2d(4, 16, 3, 1, 1), nn.PixelShuffle(2), nn.PReLU(4)

    def forward(s, x):
        return s.pr(s.ps(s.c(x))).repeat(1, 2, 1, 1)


def _hf(name):
    import transformers as T
    small = dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                 intermediate_size=128)
    table = {
        "gpt2": lambda: (T.GPT2Model(T.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=100,
                                                  n_positions=32)), ("ids",)),
        "roberta": lambda: (T.RobertaModel(T.RobertaConfig(**small, vocab_size=100,
                                                           max_position_embeddings=40)),
                            ("ids", "mask")),
        "t5_encoder": lambda: (T.T5EncoderModel(T.T5Config(num_layers=2, d_model=64, d_kv=16,
                                                           num_heads=4, d_ff=128,
                                                           vocab_size=100)), ("ids",)),
        "distilbert": lambda: (T.DistilBertModel(T.DistilBertConfig(
            n_layers=2, dim=64, n_heads=4, hidden_dim=128, vocab_size=100)), ("ids", "mask")),
        "bert_sdpa": lambda: (T.BertModel(T.BertConfig(**small, vocab_size=100,
                                                       attn_implementation="sdpa")),
                              ("ids", "mask")),
        "llama": lambda: (T.LlamaModel(T.LlamaConfig(**small, num_key_value_heads=4,
                                                     vocab_size=100, max_position_embeddings=64,
                                                     attn_implementation="eager")), ("ids",)),
        "vit": lambda: (T.ViTModel(T.ViTConfig(**small, image_size=32, patch_size=8)), ("pix",)),
        "swin": lambda: (T.SwinModel(T.SwinConfig(image_size=32, patch_size=2, embed_dim=16,
                                                  depths=[1, 1], num_heads=[2, 2],
                                                  window_size=4)), ("pix",)),
        "segformer": lambda: (T.SegformerModel(T.SegformerConfig(
            num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[16, 32],
            num_attention_heads=[1, 2], decoder_hidden_size=32, image_size=32)), ("pix",)),
        "convnext": lambda: (T.ConvNextModel(T.ConvNextConfig(
            hidden_sizes=[16, 32], depths=[1, 1], num_stages=2, image_size=32)), ("pix",)),
        "mobilevit": lambda: (T.MobileViTModel(T.MobileViTConfig(
            image_size=64, hidden_sizes=[32, 48, 64],
            neck_hidden_sizes=[8, 16, 24, 24, 32, 40, 80])), ("pix64",)),
        "resnet": lambda: (T.ResNetModel(T.ResNetConfig(embedding_size=16, hidden_sizes=[16, 32],
                                                        depths=[1, 1])), ("pix",)),
        "mobilenet_v2": lambda: (T.MobileNetV2Model(T.MobileNetV2Config(
            image_size=32, depth_multiplier=0.35)), ("pix",)),
        "wav2vec2": lambda: (T.Wav2Vec2Model(T.Wav2Vec2Config(
            **small, conv_dim=(32, 32), conv_stride=(5, 2), conv_kernel=(10, 3),
            num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4)), ("wav",)),
    }
    return table[name]()


class LastHidden(nn.Module):
    def __init__(s, m):
        super().__init__()
        s.m = m

    def forward(s, *a):
        return s.m(*a).last_hidden_state


INPUTS = {"ids": lambda: torch.randint(0, 100, (1, 12)),
          "mask": lambda: torch.ones(1, 12, dtype=torch.long),
          "pix": lambda: torch.randn(1, 3, 32, 32), "pix64": lambda: torch.randn(1, 3, 64, 64),
          "wav": lambda: torch.randn(1, 800)}
TORCH = {"mobilenet_v3_block": (MNv3Block, (1, 3, 32, 32)), "unet_block": (UNetBlock, (1, 3, 16, 16)),
         "audio_block": (AudioBlock, (1, 1, 400)), "subpixel_block": (SubPixel, (1, 4, 8, 8))}
HF = ["gpt2", "roberta", "t5_encoder", "distilbert", "bert_sdpa", "llama", "vit", "swin",
      "segformer", "convnext", "mobilevit", "resnet", "mobilenet_v2", "wav2vec2"]


def model_and_inputs(name):
    if name in TORCH:
        cls, shape = TORCH[name]
        return cls(), (torch.randn(*shape),)
    m, kinds = _hf(name)
    return LastHidden(m), tuple(INPUTS[k]() for k in kinds)


def check(name) -> bool:
    torch.manual_seed(0)
    m, xs = model_and_inputs(name)
    m.eval()
    f = io.BytesIO()
    torch.onnx.export(m, xs, f, opset_version=17, dynamo=False)
    proto = onnx.load_from_string(f.getvalue())
    sess = ort.InferenceSession(f.getvalue(), providers=["CPUExecutionProvider"])
    feeds = {i.name: a.numpy() for i, a in zip(sess.get_inputs(), xs)}
    want = sess.run(None, feeds)[0]
    ok = True
    for layout in (tc.Layout.NCHW, tc.Layout.NHWC):
        try:
            got = tc.compile_model(tc.from_onnx(proto, layout=layout))(**feeds)
            got = got[0] if isinstance(got, tuple) else got
            err = float(np.abs(got - want).max() / (np.abs(want).max() + 1e-12))
            good = got.shape == want.shape and err < 1e-4
            print(f"{name:20s} {layout.value:5s} rel err {err:.1e}  {'ok' if good else 'WRONG'}",
                  flush=True)
        except Exception as e:  # noqa: BLE001 - report and go on to the next model
            good = False
            print(f"{name:20s} {layout.value:5s} {type(e).__name__}: {str(e)[:300]}", flush=True)
        ok &= good
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", default=None, help="model names")
    names = ap.parse_args().only or list(TORCH) + HF
    failed = [n for n in names if not check(n)]
    print(f"{len(names) - len(failed)} of {len(names)} models match ONNX Runtime in both layouts"
          + (f"; failed: {', '.join(failed)}" if failed else ""))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
