"""Extra models of families the other sets do not cover (helper pcover, issue 15).

Imported by export.py, which owns the command line; this file only builds the
torch modules and their example inputs. Random weights (fixed seed), BatchNorm
statistics calibrated on one random batch, eval mode, as a user exports them.
Each entry varies something the rest of the set fixes: batch size, input
resolution, 1-D convolutions, nearest upsampling, grouped 3x3 convolutions,
window attention, transposed convolutions, a conv + recurrent stack.

  yolo_small        YOLOv5n-style detector at 320x320: Conv+BN+SiLU, C3 (CSP)
                    blocks, SPPF (three chained MaxPool 5x5 stride 1), nearest
                    Upsample x2, PAN Concat, three Detect heads reshaped,
                    Sigmoid and concatenated into [1, 6300, 85]
  wav2vec_fe        wav2vec 2.0's feature extractor (7 Conv1d, kernels 10/3/2,
                    stride 5/2, GroupNorm on the first, GELU), 256 channels,
                    1 s of 16 kHz audio [1, 16000], then a Linear projection
  tcn               temporal conv net: dilated causal Conv1d residual blocks
                    (dilation 1..32, left Pad, ReLU, 1x1 skip conv), batch 4,
                    [4, 40, 400] (40 mel bins, 400 frames), Linear over time
  resnext50_32x4d   torchvision ResNeXt-50 32x4d (grouped 3x3 convs, 32 groups)
  swin_t            torchvision Swin-T (shifted-window attention, roll, masks)
  conv_autoencoder  strided Conv encoder and ConvTranspose decoder (k4 s2 p1 and
                    k3 s2 p1 output_padding 1), BatchNorm+LeakyRelu, Sigmoid,
                    [1, 3, 128, 128]
  mobilenet_v2_b4_160  torchvision mobilenet_v2 at batch 4, 160x160
  resnet18_320      torchvision resnet18 at 320x320
  crnn              OCR CRNN: VGG-style conv stack (asymmetric pools 2x1) on a
                    [1, 1, 32, 128] text line, squeeze, 2-layer bidirectional
                    LSTM (hidden 128), per-step Linear to 37 classes, LogSoftmax
  efficientnet_b1   torchvision efficientnet_b1 at its native 240x240
  squeezenet1_0     torchvision squeezenet1_0 (7x7 stem, fire modules)
  shufflenet_v2_x0_5  torchvision shufflenet_v2_x0_5 (narrow channel shuffle)
"""


def _yolo(nn, torch):
    class Conv(nn.Module):  # Conv + BN + SiLU, "same" padding as ultralytics' autopad
        def __init__(self, cin, cout, k=1, s=1, p=None):
            super().__init__()
            self.conv = nn.Conv2d(cin, cout, k, s, k // 2 if p is None else p, bias=False)
            self.bn = nn.BatchNorm2d(cout)
            self.act = nn.SiLU()

        def forward(self, x):
            return self.act(self.bn(self.conv(x)))

    class Bottleneck(nn.Module):
        def __init__(self, c, shortcut=True):
            super().__init__()
            self.cv1, self.cv2, self.add = Conv(c, c, 1), Conv(c, c, 3), shortcut

        def forward(self, x):
            y = self.cv2(self.cv1(x))
            return x + y if self.add else y

    class C3(nn.Module):  # CSP bottleneck with three convs
        def __init__(self, cin, cout, n=1, shortcut=True):
            super().__init__()
            h = cout // 2
            self.cv1, self.cv2, self.cv3 = Conv(cin, h), Conv(cin, h), Conv(2 * h, cout)
            self.m = nn.Sequential(*(Bottleneck(h, shortcut) for _ in range(n)))

        def forward(self, x):
            return self.cv3(torch.cat((self.m(self.cv1(x)), self.cv2(x)), 1))

    class SPPF(nn.Module):
        def __init__(self, cin, cout):
            super().__init__()
            h = cin // 2
            self.cv1, self.cv2 = Conv(cin, h), Conv(4 * h, cout)
            self.m = nn.MaxPool2d(5, 1, 2)

        def forward(self, x):
            x = self.cv1(x)
            y1 = self.m(x)
            y2 = self.m(y1)
            return self.cv2(torch.cat((x, y1, y2, self.m(y2)), 1))

    class Yolo(nn.Module):  # yolov5n widths (16..256), depth 1/3
        def __init__(self, classes=80, anchors=3):
            super().__init__()
            self.b0, self.b1, self.b2 = Conv(3, 16, 6, 2, 2), Conv(16, 32, 3, 2), C3(32, 32, 1)
            self.b3, self.b4 = Conv(32, 64, 3, 2), C3(64, 64, 2)
            self.b5, self.b6 = Conv(64, 128, 3, 2), C3(128, 128, 3)
            self.b7, self.b8, self.b9 = Conv(128, 256, 3, 2), C3(256, 256, 1), SPPF(256, 256)
            self.h10, self.h13 = Conv(256, 128, 1), C3(256, 128, 1, False)
            self.h14, self.h17 = Conv(128, 64, 1), C3(128, 64, 1, False)
            self.h18, self.h20 = Conv(64, 64, 3, 2), C3(128, 128, 1, False)
            self.h21, self.h23 = Conv(128, 128, 3, 2), C3(256, 256, 1, False)
            self.up = nn.Upsample(scale_factor=2, mode="nearest")
            self.no, self.na = classes + 5, anchors
            self.detect = nn.ModuleList(nn.Conv2d(c, anchors * self.no, 1) for c in (64, 128, 256))

        def forward(self, x):
            p3 = self.b4(self.b3(self.b2(self.b1(self.b0(x)))))
            p4 = self.b6(self.b5(p3))
            p5 = self.b9(self.b8(self.b7(p4)))
            h10 = self.h10(p5)
            h13 = self.h13(torch.cat((self.up(h10), p4), 1))
            h14 = self.h14(h13)
            out3 = self.h17(torch.cat((self.up(h14), p3), 1))
            out4 = self.h20(torch.cat((self.h18(out3), h14), 1))
            out5 = self.h23(torch.cat((self.h21(out4), h10), 1))
            outs = []
            for conv, f in zip(self.detect, (out3, out4, out5)):
                y = conv(f)
                b, _, ny, nx = y.shape
                y = y.view(b, self.na, self.no, ny, nx).permute(0, 1, 3, 4, 2).contiguous()
                outs.append(y.sigmoid().view(b, -1, self.no))
            return torch.cat(outs, 1)

    return Yolo()


def _wav2vec_fe(nn, torch, dim=256):
    class FeatureExtractor(nn.Module):
        def __init__(self):
            super().__init__()
            specs = [(10, 5)] + [(3, 2)] * 4 + [(2, 2)] * 2  # wav2vec 2.0's conv_feature_layers
            layers, cin = [], 1
            for i, (k, s) in enumerate(specs):
                layers.append(nn.Conv1d(cin, dim, k, s, bias=False))
                if i == 0:
                    layers.append(nn.GroupNorm(dim, dim))  # per-channel norm over time
                layers.append(nn.GELU())
                cin = dim
            self.conv = nn.Sequential(*layers)
            self.norm = nn.LayerNorm(dim)
            self.proj = nn.Linear(dim, 384)

        def forward(self, wav):  # [B, samples]
            x = self.conv(wav.unsqueeze(1))  # [B, dim, frames]
            return self.proj(self.norm(x.transpose(1, 2)))

    return FeatureExtractor()


def _tcn(nn, torch, channels=64, levels=6, kernel=3):
    class Block(nn.Module):
        def __init__(self, cin, cout, dilation):
            super().__init__()
            self.pad = nn.ConstantPad1d(((kernel - 1) * dilation, 0), 0.0)  # causal
            self.conv1 = nn.Conv1d(cin, cout, kernel, dilation=dilation)
            self.conv2 = nn.Conv1d(cout, cout, kernel, dilation=dilation)
            self.skip = nn.Conv1d(cin, cout, 1) if cin != cout else None
            self.relu = nn.ReLU()

        def forward(self, x):
            y = self.relu(self.conv1(self.pad(x)))
            y = self.relu(self.conv2(self.pad(y)))
            return self.relu(y + (x if self.skip is None else self.skip(x)))

    class TCN(nn.Module):
        def __init__(self, inputs=40, classes=12):
            super().__init__()
            blocks, cin = [], inputs
            for i in range(levels):
                blocks.append(Block(cin, channels, 2 ** i))
                cin = channels
            self.blocks = nn.Sequential(*blocks)
            self.head = nn.Linear(channels, classes)

        def forward(self, x):  # [B, mels, frames]
            return self.head(self.blocks(x).transpose(1, 2))  # [B, frames, classes]

    return TCN()


def _autoencoder(nn):
    def down(cin, cout):
        return [nn.Conv2d(cin, cout, 3, 2, 1, bias=False), nn.BatchNorm2d(cout), nn.LeakyReLU(0.2)]

    def up(cin, cout, k):
        conv = (nn.ConvTranspose2d(cin, cout, 4, 2, 1, bias=False) if k == 4 else
                nn.ConvTranspose2d(cin, cout, 3, 2, 1, output_padding=1, bias=False))
        return [conv, nn.BatchNorm2d(cout), nn.LeakyReLU(0.2)]

    return nn.Sequential(
        *down(3, 32), *down(32, 64), *down(64, 128), *down(128, 256),
        *up(256, 128, 4), *up(128, 64, 3), *up(64, 32, 4),
        nn.ConvTranspose2d(32, 3, 3, 2, 1, output_padding=1), nn.Sigmoid())


def _crnn(nn, torch, classes=37, hidden=128):
    def conv(cin, cout, bn=False):
        layers = [nn.Conv2d(cin, cout, 3, 1, 1, bias=not bn)]
        return layers + ([nn.BatchNorm2d(cout)] if bn else []) + [nn.ReLU()]

    class CRNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.cnn = nn.Sequential(
                *conv(1, 64), nn.MaxPool2d(2, 2),                           # 16 x 64
                *conv(64, 128), nn.MaxPool2d(2, 2),                         # 8 x 32
                *conv(128, 256, True), *conv(256, 256), nn.MaxPool2d((2, 1), (2, 1)),  # 4 x 32
                *conv(256, 256, True), *conv(256, 256), nn.MaxPool2d((2, 1), (2, 1)),  # 2 x 32
                nn.Conv2d(256, 256, 2, 1, 0, bias=False), nn.BatchNorm2d(256), nn.ReLU())  # 1 x 31
            self.rnn = nn.LSTM(256, hidden, num_layers=2, bidirectional=True)
            self.fc = nn.Linear(2 * hidden, classes)

        def forward(self, x):  # [B, 1, 32, W]
            f = self.cnn(x).squeeze(2).permute(2, 0, 1)  # [T, B, 256]
            y, _ = self.rnn(f)
            return self.fc(y).log_softmax(2)  # [T, B, classes]

    return CRNN()


# name -> (input shape, builder(torch, torchvision) -> module)
COVER_MODELS = {
    "yolo_small": ([1, 3, 320, 320], lambda t, tv: _yolo(t.nn, t)),
    "wav2vec_fe": ([1, 16000], lambda t, tv: _wav2vec_fe(t.nn, t)),
    "tcn": ([4, 40, 400], lambda t, tv: _tcn(t.nn, t)),
    "resnext50_32x4d": ([1, 3, 224, 224], lambda t, tv: tv.models.resnext50_32x4d(weights=None)),
    "swin_t": ([1, 3, 224, 224], lambda t, tv: tv.models.swin_t(weights=None)),
    "conv_autoencoder": ([1, 3, 128, 128], lambda t, tv: _autoencoder(t.nn)),
    "mobilenet_v2_b4_160": ([4, 3, 160, 160], lambda t, tv: tv.models.mobilenet_v2(weights=None)),
    "resnet18_320": ([1, 3, 320, 320], lambda t, tv: tv.models.resnet18(weights=None)),
    "crnn": ([1, 1, 32, 128], lambda t, tv: _crnn(t.nn, t)),
    "efficientnet_b1": ([1, 3, 240, 240], lambda t, tv: tv.models.efficientnet_b1(weights=None)),
    "squeezenet1_0": ([1, 3, 224, 224], lambda t, tv: tv.models.squeezenet1_0(weights=None)),
    "shufflenet_v2_x0_5": ([1, 3, 224, 224], lambda t, tv: tv.models.shufflenet_v2_x0_5(weights=None)),
}


def cover_model(name, seed):
    """(model, example input) for NAME: random weights from SEED, not yet calibrated or in eval mode."""
    import torch
    import torchvision

    shape, build = COVER_MODELS[name]
    torch.manual_seed(seed)
    model = build(torch, torchvision)
    example = torch.randn(*shape)
    return model, example
