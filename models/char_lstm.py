"""Character-level LSTM language model with batched sampling under either training conditional."""

import torch
from torch import nn
from torch.nn import functional as F


def sample_categorical(probabilities: torch.Tensor, uniform: torch.Tensor) -> torch.Tensor:
    """One index per row, drawn by inverse CDF from that row's number in [0, 1).

    One uniform number per row, where `torch.multinomial` draws one per class: an order of
    magnitude faster on CPU for a batch of thousands of rows. The caller draws the numbers, so that a row's draw
    depends on its own numbers only, never on which other rows share its batch.
    """
    cumulative = probabilities.cumsum(dim=-1)
    # right=True never picks a class of probability zero, even when the uniform draw is exactly 0.
    return torch.searchsorted(cumulative, uniform[:, None] * cumulative[:, -1:], right=True).squeeze(1)


class CharLSTM(nn.Module):
    """Predicts the next character from one-hot characters (the reference's input encoding)."""

    def __init__(self, vocab_size: int, hidden_size: int = 128, num_layers: int = 4, dropout: float = 0.0):
        super().__init__()
        self.vocab_size = vocab_size
        self.lstm = nn.LSTM(vocab_size, hidden_size, num_layers, batch_first=True, dropout=dropout)
        self.head = nn.Linear(hidden_size, vocab_size)

    def sharding_units(self) -> list[nn.Module]:
        """The LSTM (its layers are one module, whose cuDNN kernel takes all their weights at once) and the
        head (`trainrig.strategies.sharding.ShardedModel`)."""
        return [self.lstm, self.head]

    def forward(self, chars: torch.Tensor, state=None):
        """`chars` holds character indices of shape (batch, time); returns logits and the LSTM state."""
        outputs, state = self.lstm(F.one_hot(chars, self.vocab_size).to(self.head.weight.dtype), state)
        return self.head(outputs), state

    @torch.no_grad()
    def sample(
        self,
        uniforms: torch.Tensor,
        pad_index: int,
        stop_index: int,
        context_length: int,
        temperature: float = 1.0,
        carry_state: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Sample one sequence per row of `uniforms` (sequences, max_length), each character conditioned as the
        model was trained and drawn with the row's number for its position.

        Both conditionals start from `context_length` padding characters and a zero state. Trained on windows
        (`carry_state=False`), each character is predicted from the `context_length` characters before it, so each
        step re-runs every unfinished sequence's last `context_length` characters. Trained on whole sequences
        (`carry_state=True`), each character is predicted from everything before it, so each step feeds the new
        character into the carried LSTM state: one LSTM step per character, and the padding prefix, the same for
        every sequence, runs once. Finished sequences leave the batch, but every call runs the network exactly
        max_length times, one row kept going (its draws unused) once all have finished: a sharded model's forwards
        are collective, so processes sampling different sequences must still run as many. Returns the sampled
        indices (sequences, max_length), stop-filled after each sequence's end, and each length.
        """
        device = self.head.weight.device
        uniforms = uniforms.to(device)
        num_samples, max_length = uniforms.shape
        samples = torch.full((num_samples, max_length), stop_index, dtype=torch.long, device=device)
        lengths = torch.full((num_samples,), max_length, dtype=torch.long, device=device)
        active = torch.arange(num_samples, device=device)
        if carry_state:
            logits, state = self(torch.full((1, context_length), pad_index, dtype=torch.long, device=device))
            next_logits = logits[:, -1].expand(num_samples, -1).clone()
            state = tuple(tensor.expand(-1, num_samples, -1).contiguous() for tensor in state)
        else:
            windows = torch.full((num_samples, context_length), pad_index, dtype=torch.long, device=device)
            next_logits = self(windows)[0][:, -1]
        for position in range(max_length):
            next_logits[:, pad_index] = float("-inf")
            probabilities = torch.softmax(next_logits.float() / temperature, dim=-1)
            chars = sample_categorical(probabilities, uniforms[active, position])
            unfinished = lengths[active] == max_length  # all but the row kept going after every sequence stopped
            samples[active[unfinished], position] = chars[unfinished]
            lengths[active[unfinished & (chars == stop_index)]] = position
            if position == max_length - 1:
                break
            keep = (unfinished & (chars != stop_index)).nonzero().squeeze(1)
            if len(keep) == 0:
                keep = keep.new_zeros(1)
            active, chars = active[keep], chars[keep]
            if carry_state:
                logits, state = self(chars[:, None], tuple(tensor.index_select(1, keep) for tensor in state))
                next_logits = logits[:, -1]
            else:
                windows = torch.cat([windows[keep, 1:], chars[:, None]], dim=1)
                next_logits = self(windows)[0][:, -1]
        return samples, lengths
