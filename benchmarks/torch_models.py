"""ResNet-50 and MobileNet-V2 in plain torch (torchvision's architectures, randomly initialized:
no downloads, and no torchvision, whose PyPI build does not load beside torch 2.13.0+cpu), and a
BERT-base encoder from transformers' ``BertModel(BertConfig())`` where transformers is installed.
Exported to ONNX once by :func:`export_onnx`."""
import os

import torch
from torch import nn


def _bn_init(model):
    # random but realistic BatchNorm statistics (fresh ones are 0/1: folding would be trivial)
    g = torch.Generator().manual_seed(0)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            with torch.no_grad():
                m.running_mean.copy_(torch.randn(m.num_features, generator=g) * 0.1)
                m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
                m.weight.copy_(torch.rand(m.num_features, generator=g) + 0.5)
                m.bias.copy_(torch.randn(m.num_features, generator=g) * 0.1)
    return model.eval()


class Bottleneck(nn.Module):
    def __init__(self, cin, width, stride, down):
        super().__init__()
        cout = width * 4
        self.conv1, self.bn1 = nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3, self.bn3 = nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout)
        self.down = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                   nn.BatchNorm2d(cout)) if down else None)

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = torch.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return torch.relu(y + (self.down(x) if self.down is not None else x))


class ResNet50(nn.Module):
    def __init__(self, classes=1000):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64),
                                  nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        layers, cin = [], 64
        for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
            for b in range(blocks):
                layers.append(Bottleneck(cin, width, stride if b == 0 else 1, b == 0))
                cin = width * 4
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(2048, classes)

    def forward(self, x):
        x = self.layers(self.stem(x))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


def _cbr(cin, cout, k, s, groups=1):
    return [nn.Conv2d(cin, cout, k, s, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout),
            nn.ReLU6()]


class InvertedResidual(nn.Module):
    def __init__(self, cin, cout, stride, expand):
        super().__init__()
        hidden = cin * expand
        layers = _cbr(cin, hidden, 1, 1) if expand != 1 else []
        layers += _cbr(hidden, hidden, 3, stride, groups=hidden)
        layers += [nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout)]
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        return x + self.body(x) if self.residual else self.body(x)


class MobileNetV2(nn.Module):
    def __init__(self, classes=1000):
        super().__init__()
        layers, cin = _cbr(3, 32, 3, 2), 32
        for t, c, n, s in ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                           (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)):
            for i in range(n):
                layers.append(InvertedResidual(cin, c, s if i == 0 else 1, t))
                cin = c
        layers += _cbr(cin, 1280, 1, 1)
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(1280, classes)

    def forward(self, x):
        x = nn.functional.adaptive_avg_pool2d(self.features(x), 1)
        return self.fc(torch.flatten(x, 1))


def bert_base(seq: int = 128):
    """``(model, example inputs)`` of a BERT-base encoder, or None without transformers."""
    try:
        from transformers import BertConfig, BertModel
    except ImportError:
        return None
    torch.manual_seed(0)
    m = _BertEncoder(BertModel(BertConfig()).eval()).eval()
    ids = torch.randint(0, 30522, (1, seq))
    return m, (ids, torch.ones(1, seq, dtype=torch.int64))


class _BertEncoder(nn.Module):
    """BERT called with keyword inputs, returning its last hidden state: the TorchScript exporter
    passes inputs by position, which transformers 5's ``forward`` no longer takes in this order."""

    def __init__(self, bert):
        super().__init__()
        self.bert = bert

    def forward(self, input_ids, attention_mask):
        return self.bert(input_ids=input_ids, attention_mask=attention_mask,
                         use_cache=False).last_hidden_state


def models(only=None) -> dict:
    """name -> (module, example inputs, input names), for the names in ``only`` (default all;
    the CNNs are made in one seeded order whatever is chosen, so that their weights match the
    ONNX files cached by :func:`export_onnx`; BERT, the slow one, only when chosen)."""
    torch.manual_seed(0)
    out = {"resnet50": (_bn_init(ResNet50()), (torch.randn(1, 3, 224, 224),), ["x"]),
           "mobilenet_v2": (_bn_init(MobileNetV2()), (torch.randn(1, 3, 224, 224),), ["x"])}
    bert = bert_base() if not only or "bert_base" in only else None
    if bert is not None:
        out["bert_base"] = (bert[0], bert[1], ["input_ids", "attention_mask"])
    return {k: v for k, v in out.items() if not only or k in only}


def export_onnx(name, module, inputs, input_names, cache_dir) -> str:
    """The model exported to ONNX (opset 17, TorchScript exporter) once into ``cache_dir``."""
    os.makedirs(cache_dir, exist_ok=True)
    path = os.path.join(cache_dir, f"{name}.onnx")
    if not os.path.exists(path):
        with torch.no_grad():
            torch.onnx.export(module, inputs, path, input_names=input_names, opset_version=17,
                              dynamo=False)
    return path
