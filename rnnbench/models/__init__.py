"""CNN models for the `cnns` runner group, written in plain torch.nn.

They stand in for torchvision's so an LSTM-only run never imports torchvision (fastrnns imported
it for every run) and the suite has one dependency less.
"""

from rnnbench.models.resnet import ResNet, resnet18, resnet50

__all__ = ["ResNet", "resnet18", "resnet50"]
