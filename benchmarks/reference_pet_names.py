"""The reference tutorial's pet-name pipeline, re-implemented as the baseline for benchmarks/pet_names.py.

It keeps the tutorial's approach on purpose: list comprehensions over every prefix of every
name, `characters.index` per character, one-hot inputs built up front, a per-sample Dataset
with a default-collate DataLoader, a plain training loop, and generation one name at a time
that re-runs the padded prefix for every character.
"""

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

CHARACTERS = list("*+abcdefghijklmnopqrstuvwxyz-. ")
WINDOW = 8


def format_training_data(pet_names: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    prefixes = [
        name_with_stop[:end]
        for name in pet_names
        for name_with_stop in [name + "+"]
        for end in range(1, len(name_with_stop) + 1)
    ]
    clipped = [list(prefix)[-(WINDOW + 1) :] for prefix in prefixes]
    padded = [list("*" * (WINDOW + 1 - len(chars))) + chars for chars in clipped]
    numeric = [[CHARACTERS.index(char) for char in chars] for chars in padded]
    targets = torch.tensor([row[1:] for row in numeric])
    inputs = torch.tensor([row[:-1] for row in numeric])
    return nn.functional.one_hot(inputs, num_classes=len(CHARACTERS)).float(), targets


class PrefixDataset(Dataset):
    def __init__(self, pet_names: list[str]):
        self.x, self.y = format_training_data(pet_names)
        self.permutation = torch.randperm(len(self.x))

    def __getitem__(self, index):
        index = self.permutation[index]
        return self.x[index], self.y[index]

    def __len__(self):
        return len(self.x)


class ReferenceModel(nn.Module):
    def __init__(self, hidden_size: int = 128, num_layers: int = 4):
        super().__init__()
        self.lstm = nn.LSTM(len(CHARACTERS), hidden_size, num_layers, batch_first=True)
        self.fc = nn.Linear(hidden_size, len(CHARACTERS))

    def forward(self, x):
        output, _ = self.lstm(x)
        return self.fc(output)


def train_one_epoch(model: nn.Module, dataset: PrefixDataset, batch_size: int = 16384, lr: float = 1e-3) -> float:
    loader = DataLoader(dataset, batch_size=batch_size)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    for batch_x, batch_y in loader:
        optimizer.zero_grad()
        loss = criterion(model(batch_x).transpose(1, 2), batch_y)
        loss.backward()
        optimizer.step()
    return loss.item()


def generate_name(model: nn.Module, max_length: int = 30) -> str:
    name: list[str] = []
    next_letter = ""
    while next_letter != "+" and len(name) < max_length:
        window = name[-WINDOW:]
        window = list("*" * (WINDOW - len(window))) + window
        numeric = torch.tensor([CHARACTERS.index(char) for char in window])
        one_hot = torch.unsqueeze(nn.functional.one_hot(numeric, num_classes=len(CHARACTERS)).float(), 0)
        with torch.no_grad():
            logits = model(one_hot)
        probabilities = (
            torch.nn.functional.softmax(logits[0, -1, :], dim=0).detach().cpu().numpy().astype(np.float64)[1:]
        )
        probabilities = [p / sum(probabilities) for p in probabilities]
        next_letter = CHARACTERS[np.random.choice(len(CHARACTERS) - 1, p=probabilities) + 1]
        if next_letter != "+":
            name.append(next_letter)
    return "".join(name)
