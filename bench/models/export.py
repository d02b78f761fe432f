#!/usr/bin/python3
"""Exports the benchmark/test models in the ONNX backend-test layout.

    /usr/bin/python3 bench/models/export.py [--out DIR] [--only NAME ...] [--extra] [--opset N]

For each model NAME it writes DIR/NAME/model.onnx and DIR/NAME/test_data_set_0/
{input_0.pb, output_0.pb}, the expected output computed by torch (or numpy for
op_chain_500), so that `kiln conformance DIR` checks Kiln against it.

Models (random weights, fixed seeds, eval mode):
  resnet18, mobilenet_v2, squeezenet1_1   torchvision architectures, input [1, 3, 224, 224]
  bert_encoder                            4 layers, hidden 256, 4 heads, ffn 1024, seq 128,
                                          plain Linear/matmul/softmax/LayerNorm/GELU(erf)
  op_chain_500                            250 Add + 250 Mul on a [1, 64] tensor (onnx.helper)
  efficientnet_b0, mobilenet_v3_small     torchvision, input [1, 3, 224, 224]: 5x5 and stride-2
                                          depthwise convs, squeeze-excite, SiLU / HardSwish
  lstm_bidir                              2-layer bidirectional LSTM, input 64, hidden 128,
                                          batch 1, 32 steps, then a Linear head (ONNX LSTM ops)
  gru_bidir                               2-layer bidirectional GRU, input 64, hidden 128,
                                          batch 1, 50 steps, then a Linear head (ONNX GRU ops)
  seg_unet                                encoder-decoder segmentation net, input [1, 3, 128, 128]:
                                          ConvTranspose, bilinear Resize, skip Concat,
                                          BatchNormalization after Concat (not foldable into a
                                          Conv), HardSwish
  gpt_decoder                             decoder-only transformer, 4 layers, hidden 256, 4 heads,
                                          vocab 1000, causal mask, int64 token ids [1, seq] with
                                          seq dynamic (dynamic_axes; test data has seq 64)

Extra models (only with --extra or --only NAME; see EXTRA_MODELS below):
  densenet121, googlenet, shufflenet_v2_x1_0, regnet_y_400mf, mnasnet1_0, resnet50,
  mobilenet_v3_large                      torchvision, input [1, 3, 224, 224]
  lraspp_mobilenet_v3_large,
  deeplabv3_mobilenet_v3_large            torchvision segmentation, input [1, 3, 256, 256]
  vit_tiny, convnext_tiny, bert_small_128, bert_mini_384, gpt2_small,
  mha_encoder, transformer_decoder, lstm_uni, gru_long
                                          transformer and recurrent nets (section famseq below)
  yolo_small, wav2vec_fe, tcn, resnext50_32x4d, swin_t, conv_autoencoder,
  mobilenet_v2_b4_160, resnet18_320, crnn, efficientnet_b1, squeezenet1_0,
  shufflenet_v2_x0_5                      more families: detector, 1-D audio, grouped and
                                          transposed convs, window attention, batch 4,
                                          other resolutions, conv + LSTM (cover_models.py)

Needs torch and torchvision (Debian: python3-torch, python3-torchvision) except
for op_chain_500, which needs only onnx and numpy.
"""

import argparse
import math
import os
import sys
import time

import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto

from cover_models import COVER_MODELS

SEED = 0
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_OUT = os.path.join(REPO, "bench", "models", "out")


def write_test_data(model_dir, inputs, outputs):
    """inputs/outputs: lists of (name, numpy array)."""
    data_dir = os.path.join(model_dir, "test_data_set_0")
    os.makedirs(data_dir, exist_ok=True)
    for kind, values in (("input", inputs), ("output", outputs)):
        for i, (name, array) in enumerate(values):
            tensor = numpy_helper.from_array(np.ascontiguousarray(array), name)
            with open(os.path.join(data_dir, f"{kind}_{i}.pb"), "wb") as f:
                f.write(tensor.SerializeToString())


# ---------------------------------------------------------------------------
# torch models


def torch_modules():
    import torch
    from torch import nn

    class SelfAttention(nn.Module):
        def __init__(self, hidden, heads):
            super().__init__()
            self.heads = heads
            self.head_dim = hidden // heads
            self.query = nn.Linear(hidden, hidden)
            self.key = nn.Linear(hidden, hidden)
            self.value = nn.Linear(hidden, hidden)
            self.out = nn.Linear(hidden, hidden)

        def split(self, x):  # [B, S, H] -> [B, heads, S, head_dim]
            b, s, _ = x.shape
            return x.reshape(b, s, self.heads, self.head_dim).transpose(1, 2)

        def forward(self, x):
            b, s, h = x.shape
            q, k, v = self.split(self.query(x)), self.split(self.key(x)), self.split(self.value(x))
            scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
            probs = torch.softmax(scores, dim=-1)
            context = torch.matmul(probs, v).transpose(1, 2).reshape(b, s, h)
            return self.out(context)

    class EncoderLayer(nn.Module):
        def __init__(self, hidden, heads, ffn):
            super().__init__()
            self.attention = SelfAttention(hidden, heads)
            self.norm1 = nn.LayerNorm(hidden, eps=1e-12)
            self.ffn_in = nn.Linear(hidden, ffn)
            self.ffn_out = nn.Linear(ffn, hidden)
            self.norm2 = nn.LayerNorm(hidden, eps=1e-12)

        @staticmethod
        def gelu(x):  # the erf form, as BERT defines it
            return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))

        def forward(self, x):
            x = self.norm1(x + self.attention(x))
            return self.norm2(x + self.ffn_out(self.gelu(self.ffn_in(x))))

    class Encoder(nn.Module):
        def __init__(self, layers=4, hidden=256, heads=4, ffn=1024):
            super().__init__()
            self.layers = nn.ModuleList([EncoderLayer(hidden, heads, ffn) for _ in range(layers)])

        def forward(self, x):
            for layer in self.layers:
                x = layer(x)
            return x

    class CausalSelfAttention(SelfAttention):
        def __init__(self, hidden, heads, max_seq):
            super().__init__(hidden, heads)
            mask = torch.full((max_seq, max_seq), float("-inf")).triu(1)
            self.register_buffer("mask", mask)

        def forward(self, x):
            b, s, h = x.shape
            q, k, v = self.split(self.query(x)), self.split(self.key(x)), self.split(self.value(x))
            scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
            probs = torch.softmax(scores + self.mask[:s, :s], dim=-1)
            context = torch.matmul(probs, v).transpose(1, 2).reshape(b, s, h)
            return self.out(context)

    class DecoderLayer(nn.Module):  # pre-norm, as GPT-2
        def __init__(self, hidden, heads, ffn, max_seq):
            super().__init__()
            self.norm1 = nn.LayerNorm(hidden)
            self.attention = CausalSelfAttention(hidden, heads, max_seq)
            self.norm2 = nn.LayerNorm(hidden)
            self.ffn_in = nn.Linear(hidden, ffn)
            self.ffn_out = nn.Linear(ffn, hidden)

        def forward(self, x):
            x = x + self.attention(self.norm1(x))
            return x + self.ffn_out(EncoderLayer.gelu(self.ffn_in(self.norm2(x))))

    class Decoder(nn.Module):
        def __init__(self, layers=4, hidden=256, heads=4, ffn=1024, vocab=1000, max_seq=256):
            super().__init__()
            self.tokens = nn.Embedding(vocab, hidden)
            self.positions = nn.Embedding(max_seq, hidden)
            self.layers = nn.ModuleList([DecoderLayer(hidden, heads, ffn, max_seq) for _ in range(layers)])
            self.norm = nn.LayerNorm(hidden)
            self.head = nn.Linear(hidden, vocab, bias=False)

        def forward(self, ids):
            positions = torch.arange(ids.shape[1], device=ids.device).unsqueeze(0)
            x = self.tokens(ids) + self.positions(positions)
            for layer in self.layers:
                x = layer(x)
            return self.head(self.norm(x))

    class Recurrent(nn.Module):
        def __init__(self, cell, inputs=64, hidden=128, layers=2, classes=10):
            super().__init__()
            self.rnn = cell(inputs, hidden, num_layers=layers, bidirectional=True)
            self.head = nn.Linear(2 * hidden, classes)

        def forward(self, x):  # x [seq, 1, inputs]
            y, _ = self.rnn(x)
            return self.head(y)

    def conv_bn(cin, cout, stride=1):
        return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.Hardswish())

    class Up(nn.Module):
        """Upsamples `x` by 2 (ConvTranspose or bilinear Resize), concatenates
        the skip, then BatchNormalization on the concatenation (no Conv
        before it to fold into), HardSwish and a 3x3 conv."""

        def __init__(self, cin, cskip, cout, transposed):
            super().__init__()
            self.up = nn.ConvTranspose2d(cin, cin // 2, 2, 2) if transposed else None
            cup = cin // 2 if transposed else cin
            self.norm = nn.BatchNorm2d(cup + cskip)
            self.act = nn.Hardswish()
            self.conv = conv_bn(cup + cskip, cout)

        def forward(self, x, skip):
            if self.up is not None:
                x = self.up(x)
            else:
                x = nn.functional.interpolate(x, scale_factor=2.0, mode="bilinear", align_corners=False)
            return self.conv(self.act(self.norm(torch.cat([x, skip], dim=1))))

    class SegNet(nn.Module):
        def __init__(self, classes=8):
            super().__init__()
            self.enc1 = nn.Sequential(conv_bn(3, 16, 2), conv_bn(16, 16))  # 64
            self.enc2 = nn.Sequential(conv_bn(16, 32, 2), conv_bn(32, 32))  # 32
            self.enc3 = nn.Sequential(conv_bn(32, 64, 2), conv_bn(64, 64))  # 16
            self.enc4 = nn.Sequential(conv_bn(64, 128, 2), conv_bn(128, 128))  # 8
            self.up3 = Up(128, 64, 64, transposed=True)  # 16
            self.up2 = Up(64, 32, 32, transposed=False)  # 32
            self.up1 = Up(32, 16, 16, transposed=True)  # 64
            self.head = nn.ConvTranspose2d(16, classes, 2, 2)  # 128

        def forward(self, x):
            e1 = self.enc1(x)
            e2 = self.enc2(e1)
            e3 = self.enc3(e2)
            e4 = self.enc4(e3)
            return self.head(self.up1(self.up2(self.up3(e4, e3), e2), e1))

    return {"encoder": Encoder, "decoder": Decoder, "recurrent": Recurrent, "segnet": SegNet}


def calibrate_batch_norm(model, batch):
    """Sets BatchNorm running statistics from one random batch.

    With freshly initialized statistics (mean 0, var 1) activations shrink or
    grow layer after layer; mobilenet_v2's outputs end up near 1e-9, where any
    atol accepts anything. Real statistics keep outputs O(1), so comparing
    them with Kiln's means something.
    """
    import torch
    from torch import nn

    norms = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    if not norms:
        return
    for m in norms:
        m.reset_running_stats()
        m.momentum = None  # cumulative average: one batch sets the statistics
    model.train()
    with torch.no_grad():
        model(batch)


def export_torch(name, model_dir, opset):
    import torch
    import torchvision

    torch.manual_seed(SEED)
    modules = torch_modules()
    dynamic_axes = None
    if name == "bert_encoder":
        model = modules["encoder"]()
        example = torch.randn(1, 128, 256)
    elif name == "gpt_decoder":
        model = modules["decoder"]()
        example = torch.randint(0, 1000, (1, 64), dtype=torch.int64)
        dynamic_axes = {"input": {1: "seq"}, "output": {1: "seq"}}
    elif name in ("lstm_bidir", "gru_bidir"):
        cell, steps = (torch.nn.LSTM, 32) if name == "lstm_bidir" else (torch.nn.GRU, 50)
        model = modules["recurrent"](cell)
        example = torch.randn(steps, 1, 64)
    elif name == "seg_unet":
        model = modules["segnet"]()
        example = torch.randn(1, 3, 128, 128)
        calibrate_batch_norm(model, torch.randn(8, 3, 128, 128))
    else:
        model = getattr(torchvision.models, name)(weights=None)
        example = torch.randn(1, 3, 224, 224)
        calibrate_batch_norm(model, torch.randn(8, 3, 224, 224))
    model.eval()
    with torch.no_grad():
        expected = model(example)
        path = os.path.join(model_dir, "model.onnx")
        torch.onnx.export(model, (example,), path, opset_version=opset, input_names=["input"],
                          output_names=["output"], do_constant_folding=True, dynamic_axes=dynamic_axes)
    write_test_data(model_dir, [("input", example.numpy())], [("output", expected.numpy())])


# ---------------------------------------------------------------------------
# op_chain_500: many tiny nodes (per-node overhead)


def export_op_chain(model_dir, opset, pairs=250, width=64):
    rng = np.random.default_rng(SEED)
    nodes, inits = [], []
    x = rng.uniform(-1, 1, size=(1, width)).astype(np.float32)
    value, current = x.copy(), "input"
    for i in range(pairs):
        a = rng.uniform(-0.01, 0.01, size=(1, width)).astype(np.float32)
        m = rng.uniform(0.99, 1.01, size=(1, width)).astype(np.float32)
        inits += [numpy_helper.from_array(a, f"add_{i}.b"), numpy_helper.from_array(m, f"mul_{i}.b")]
        nodes.append(helper.make_node("Add", [current, f"add_{i}.b"], [f"add_{i}"], name=f"add_{i}"))
        out = "output" if i == pairs - 1 else f"mul_{i}"
        nodes.append(helper.make_node("Mul", [f"add_{i}", f"mul_{i}.b"], [out], name=f"mul_{i}"))
        value = (value + a) * m  # float32 throughout, the same order as the graph
        current = out
    graph = helper.make_graph(
        nodes, "op_chain_500",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, width])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, width])],
        initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="kiln bench/models/export.py")
    model.ir_version = 8
    onnx.save(model, os.path.join(model_dir, "model.onnx"))
    write_test_data(model_dir, [("input", x)], [("output", value.astype(np.float32))])


# ---------------------------------------------------------------------------
# Extra transformer and recurrent models (helper famseq; issue 15's "families
# beyond the benchmark set"). Not exported by default: `--extra` exports them
# all, `--only NAME` one of them. Shapes vary what the bench set fixes: width,
# heads, sequence length, batch, attention as nn.MultiheadAttention exports it,
# the tanh form of GELU, LayerNorm over channels behind permutes.
#
#   vit_tiny             ViT-Tiny-like: 16x16 patch conv, cls token, pos-embedding,
#                        12 pre-norm nn.TransformerEncoderLayer (dim 192, 3 heads,
#                        mlp 768, GELU), input [1, 3, 224, 224]
#   convnext_tiny        torchvision convnext_tiny, input [1, 3, 224, 224]
#   bert_small_128       4 layers, hidden 512, 8 heads, ffn 2048, seq 128 (as bert_encoder)
#   bert_mini_384        4 layers, hidden 256, 4 heads, ffn 1024, seq 384
#   gpt2_small           GPT-2-style: fused QKV Linear split in three, tanh GELU,
#                        causal mask by Where, 4 layers, hidden 384, 6 heads, vocab 2000,
#                        dynamic seq (test data seq 160)
#   mha_encoder          nn.TransformerEncoder (post-norm, ReLU), 4 layers, d_model 256,
#                        8 heads, ffn 1024, input [100, 2, 256] (seq, batch, dim)
#   transformer_decoder  nn.TransformerDecoder, 3 layers, d_model 256, 4 heads, ffn 1024,
#                        causal self-attention and cross-attention; inputs tgt [48, 1, 256],
#                        memory [100, 1, 256]
#   lstm_uni             2-layer unidirectional LSTM, input 128, hidden 256, batch 4,
#                        150 steps, Linear head
#   gru_long             2-layer GRU (batch_first), input 64, hidden 256, batch 8,
#                        200 steps, Linear head


def famseq_modules():
    import torch
    from torch import nn

    base = torch_modules()

    class ViT(nn.Module):
        def __init__(self, image=224, patch=16, dim=192, depth=12, heads=3, mlp=768, classes=1000):
            super().__init__()
            tokens = (image // patch) ** 2
            self.patch = nn.Conv2d(3, dim, patch, patch)
            self.cls = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
            self.pos = nn.Parameter(torch.randn(1, tokens + 1, dim) * 0.02)
            # batch_first=False: torch 1.13 cannot export the fused fast path.
            layer = nn.TransformerEncoderLayer(dim, heads, mlp, dropout=0.0, activation="gelu", norm_first=True)
            self.blocks = nn.TransformerEncoder(layer, depth)
            self.norm = nn.LayerNorm(dim, eps=1e-6)
            self.head = nn.Linear(dim, classes)

        def forward(self, x):
            x = self.patch(x).flatten(2).transpose(1, 2)  # [B, tokens, dim]
            x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
            x = self.blocks(x.transpose(0, 1)).transpose(0, 1)
            return self.head(self.norm(x[:, 0]))

    class GPT2Attention(nn.Module):
        def __init__(self, hidden, heads, max_seq):
            super().__init__()
            self.heads, self.head_dim = heads, hidden // heads
            self.c_attn = nn.Linear(hidden, 3 * hidden)
            self.c_proj = nn.Linear(hidden, hidden)
            self.register_buffer("bias", torch.tril(torch.ones(max_seq, max_seq, dtype=torch.bool)))

        def forward(self, x):
            b, s, h = x.shape
            q, k, v = self.c_attn(x).split(h, dim=2)
            q, k, v = (t.reshape(b, s, self.heads, self.head_dim).permute(0, 2, 1, 3) for t in (q, k, v))
            scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
            scores = torch.where(self.bias[:s, :s], scores, torch.tensor(torch.finfo(scores.dtype).min))
            context = torch.matmul(torch.softmax(scores, dim=-1), v).permute(0, 2, 1, 3).reshape(b, s, h)
            return self.c_proj(context)

    def gelu_tanh(x):  # GPT-2's gelu_new
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))

    class GPT2Block(nn.Module):
        def __init__(self, hidden, heads, max_seq):
            super().__init__()
            self.ln_1 = nn.LayerNorm(hidden, eps=1e-5)
            self.attn = GPT2Attention(hidden, heads, max_seq)
            self.ln_2 = nn.LayerNorm(hidden, eps=1e-5)
            self.c_fc = nn.Linear(hidden, 4 * hidden)
            self.c_proj = nn.Linear(4 * hidden, hidden)

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.c_proj(gelu_tanh(self.c_fc(self.ln_2(x))))

    class GPT2(nn.Module):
        def __init__(self, layers=4, hidden=384, heads=6, vocab=2000, max_seq=512):
            super().__init__()
            self.wte = nn.Embedding(vocab, hidden)
            self.wpe = nn.Embedding(max_seq, hidden)
            self.h = nn.ModuleList([GPT2Block(hidden, heads, max_seq) for _ in range(layers)])
            self.ln_f = nn.LayerNorm(hidden)
            self.lm_head = nn.Linear(hidden, vocab, bias=False)

        def forward(self, ids):
            positions = torch.arange(ids.shape[1], device=ids.device).unsqueeze(0)
            x = self.wte(ids) + self.wpe(positions)
            for block in self.h:
                x = block(x)
            return self.lm_head(self.ln_f(x))

    class MhaEncoder(nn.Module):
        def __init__(self, d_model=256, heads=8, ffn=1024, layers=4):
            super().__init__()
            layer = nn.TransformerEncoderLayer(d_model, heads, ffn, dropout=0.0)
            self.encoder = nn.TransformerEncoder(layer, layers)

        def forward(self, x):  # [seq, batch, dim]
            return self.encoder(x)

    class Decoder(nn.Module):
        def __init__(self, d_model=256, heads=4, ffn=1024, layers=3, max_seq=48):
            super().__init__()
            layer = nn.TransformerDecoderLayer(d_model, heads, ffn, dropout=0.0)
            self.decoder = nn.TransformerDecoder(layer, layers)
            self.register_buffer("mask", torch.full((max_seq, max_seq), float("-inf")).triu(1))

        def forward(self, tgt, memory):
            return self.decoder(tgt, memory, tgt_mask=self.mask)

    class Recurrent(nn.Module):
        def __init__(self, cell, inputs, hidden, layers=2, classes=10, batch_first=False):
            super().__init__()
            self.rnn = cell(inputs, hidden, num_layers=layers, batch_first=batch_first)
            self.head = nn.Linear(hidden, classes)

        def forward(self, x):
            y, _ = self.rnn(x)
            return self.head(y)

    return {"vit": ViT, "gpt2": GPT2, "mha": MhaEncoder, "decoder": Decoder, "recurrent": Recurrent,
            "encoder": base["encoder"]}


def famseq_model(name):
    """(model, example inputs, input names, dynamic_axes) for an extra sequence model."""
    import torch
    import torchvision

    torch.manual_seed(SEED)
    m = famseq_modules()
    if name == "vit_tiny":
        return m["vit"](), (torch.randn(1, 3, 224, 224),), ["input"], None
    if name == "convnext_tiny":
        return torchvision.models.convnext_tiny(weights=None), (torch.randn(1, 3, 224, 224),), ["input"], None
    if name == "bert_small_128":
        return m["encoder"](4, 512, 8, 2048), (torch.randn(1, 128, 512),), ["input"], None
    if name == "bert_mini_384":
        return m["encoder"](4, 256, 4, 1024), (torch.randn(1, 384, 256),), ["input"], None
    if name == "gpt2_small":
        ids = torch.randint(0, 2000, (1, 160), dtype=torch.int64)
        return m["gpt2"](), (ids,), ["input"], {"input": {1: "seq"}, "output": {1: "seq"}}
    if name == "mha_encoder":
        return m["mha"](), (torch.randn(100, 2, 256),), ["input"], None
    if name == "transformer_decoder":
        return m["decoder"](), (torch.randn(48, 1, 256), torch.randn(100, 1, 256)), ["tgt", "memory"], None
    if name == "lstm_uni":
        return m["recurrent"](torch.nn.LSTM, 128, 256), (torch.randn(150, 4, 128),), ["input"], None
    if name == "gru_long":
        model = m["recurrent"](torch.nn.GRU, 64, 256, batch_first=True)
        return model, (torch.randn(8, 200, 64),), ["input"], None
    raise ValueError(name)


def export_famseq(name, model_dir, opset):
    import torch

    model, example, input_names, dynamic_axes = famseq_model(name)
    model.eval()
    with torch.no_grad():
        expected = model(*example)
        torch.onnx.export(model, example, os.path.join(model_dir, "model.onnx"), opset_version=opset,
                          input_names=input_names, output_names=["output"], do_constant_folding=True,
                          dynamic_axes=dynamic_axes)
    write_test_data(model_dir, [(n, t.numpy()) for n, t in zip(input_names, example)],
                    [("output", expected.numpy())])


FAMSEQ_MODELS = ["vit_tiny", "convnext_tiny", "bert_small_128", "bert_mini_384", "gpt2_small", "mha_encoder",
                 "transformer_decoder", "lstm_uni", "gru_long"]

# end of famseq's section
# ---------------------------------------------------------------------------


MODELS = ["resnet18", "mobilenet_v2", "squeezenet1_1", "bert_encoder", "op_chain_500", "efficientnet_b0",
          "mobilenet_v3_small", "lstm_bidir", "gru_bidir", "seg_unet", "gpt_decoder"]


# ---------------------------------------------------------------------------
# Extra models (issue 15: "the goal holds for models of these families beyond
# the benchmark set too"). Not exported by default, so `make models` and
# `make bench` time is unchanged; `--extra` exports them all, `--only NAME`
# one. Each helper keeps its own section below and adds its names to
# EXTRA_MODELS.

# -- convolutional families (famconv): torchvision architectures with random
# weights and calibrated BatchNorm statistics, batch 1, as a user exports them.
# name -> (input [N, C, H, W], constructor keyword arguments)
EXTRA_CONV_MODELS = {
    "densenet121": ([1, 3, 224, 224], {}),  # pre-activation BN+Relu after channel Concat
    "googlenet": ([1, 3, 224, 224], {"aux_logits": False, "init_weights": True}),  # Inception branches
    "shufflenet_v2_x1_0": ([1, 3, 224, 224], {}),  # channel split / shuffle (Reshape-Transpose-Reshape)
    "regnet_y_400mf": ([1, 3, 224, 224], {}),  # group convs (group width 8), squeeze-excite
    "mnasnet1_0": ([1, 3, 224, 224], {}),  # 5x5 and stride-2 depthwise
    "resnet50": ([1, 3, 224, 224], {}),  # bottleneck 1x1 / 3x3 convs
    "mobilenet_v3_large": ([1, 3, 224, 224], {}),  # HardSwish, squeeze-excite
    # segmentation: dilated backbone, bilinear Resize back to the input size
    "lraspp_mobilenet_v3_large": ([1, 3, 256, 256], {"weights_backbone": None, "num_classes": 21}),
    "deeplabv3_mobilenet_v3_large": ([1, 3, 256, 256], {"weights_backbone": None, "num_classes": 21}),
}


def export_extra_conv(name, model_dir, opset):
    import torch
    import torchvision

    shape, kwargs = EXTRA_CONV_MODELS[name]
    torch.manual_seed(SEED)
    if name in ("lraspp_mobilenet_v3_large", "deeplabv3_mobilenet_v3_large"):
        class OutOnly(torch.nn.Module):  # segmentation models return {"out": ..., "aux": ...}
            def __init__(self, net):
                super().__init__()
                self.net = net

            def forward(self, x):
                return self.net(x)["out"]

        model = OutOnly(getattr(torchvision.models.segmentation, name)(weights=None, **kwargs))
    else:
        model = getattr(torchvision.models, name)(weights=None, **kwargs)
    example = torch.randn(*shape)
    calibrate_batch_norm(model, torch.randn(8, *shape[1:]))
    model.eval()
    with torch.no_grad():
        expected = model(example)
        path = os.path.join(model_dir, "model.onnx")
        torch.onnx.export(model, (example,), path, opset_version=opset, input_names=["input"],
                          output_names=["output"], do_constant_folding=True)
    write_test_data(model_dir, [("input", example.numpy())], [("output", expected.numpy())])


# -- families the sets above miss (pcover): detector, 1-D audio convs, grouped
# and transposed convs, window attention, batch 4, other resolutions, CRNN.
# The list and the modules are in cover_models.py.
def export_cover(name, model_dir, opset):
    import torch
    from cover_models import cover_model

    model, example = cover_model(name, SEED)
    calibrate_batch_norm(model, torch.randn(8, *example.shape[1:]))
    model.eval()
    with torch.no_grad():
        expected = model(example)
        torch.onnx.export(model, (example,), os.path.join(model_dir, "model.onnx"), opset_version=opset,
                          input_names=["input"], output_names=["output"], do_constant_folding=True)
    write_test_data(model_dir, [("input", example.numpy())], [("output", expected.numpy())])


# name -> export function (model_dir, opset)
EXTRA_MODELS = {name: (lambda d, o, n=name: export_extra_conv(n, d, o)) for name in EXTRA_CONV_MODELS}
EXTRA_MODELS.update({name: (lambda d, o, n=name: export_famseq(n, d, o)) for name in FAMSEQ_MODELS})
EXTRA_MODELS.update({name: (lambda d, o, n=name: export_cover(n, d, o)) for name in COVER_MODELS})


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=DEFAULT_OUT, help="output folder (default bench/models/out)")
    parser.add_argument("--only", action="append", choices=MODELS + list(EXTRA_MODELS), metavar="NAME",
                        help="export only NAME (repeatable): " + ", ".join(MODELS + list(EXTRA_MODELS)))
    parser.add_argument("--extra", action="store_true",
                        help="export the extra models (not exported by default): " + ", ".join(EXTRA_MODELS))
    parser.add_argument("--opset", type=int, default=13, help="ONNX opset, 13..17 (default 13)")
    args = parser.parse_args(argv)
    if not 13 <= args.opset <= 17:
        parser.error(f"--opset must be in 13..17, got {args.opset}")

    for name in args.only or (list(EXTRA_MODELS) if args.extra else MODELS):
        model_dir = os.path.join(args.out, name)
        os.makedirs(model_dir, exist_ok=True)
        start = time.time()
        if name == "op_chain_500":
            export_op_chain(model_dir, args.opset)
        elif name in EXTRA_MODELS:
            try:
                EXTRA_MODELS[name](model_dir, args.opset)
            except ImportError as e:
                sys.exit(f"export.py: error: {name} needs torch and torchvision ({e}); "
                         "install python3-torch python3-torchvision")
        else:
            try:
                export_torch(name, model_dir, args.opset)
            except ImportError as e:
                sys.exit(f"export.py: error: {name} needs torch and torchvision ({e}); "
                         "install python3-torch python3-torchvision")
        path = os.path.join(model_dir, "model.onnx")
        onnx.checker.check_model(path)
        size = os.path.getsize(path) / 1e6
        print(f"{name}: {path} ({size:.1f} MB, {time.time() - start:.1f} s)")


if __name__ == "__main__":
    main(sys.argv[1:])
