"""The official PyTorch word_language_model example (pytorch/examples), shrunk:
an RNN (LSTM or GRU) or a Transformer encoder language model with tied
embeddings, batchify/get_batch over a token stream, truncated BPTT with
repackage_hidden, gradient clipping and manual SGD with learning-rate annealing."""

import math
import zlib

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class RNNModel(nn.Module):
    """Container module with an encoder, a recurrent module, and a decoder."""

    def __init__(self, rnn_type, ntoken, ninp, nhid, nlayers, dropout=0.5, tie_weights=False):
        super(RNNModel, self).__init__()
        self.ntoken = ntoken
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        if rnn_type in ["LSTM", "GRU"]:
            self.rnn = getattr(nn, rnn_type)(ninp, nhid, nlayers, dropout=dropout)
        else:
            nonlinearity = {"RNN_TANH": "tanh", "RNN_RELU": "relu"}[rnn_type]
            self.rnn = nn.RNN(ninp, nhid, nlayers, nonlinearity=nonlinearity, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        if tie_weights:
            if nhid != ninp:
                raise ValueError("When using the tied flag, nhid must be equal to emsize")
            self.decoder.weight = self.encoder.weight
        self.init_weights()
        self.rnn_type = rnn_type
        self.nhid = nhid
        self.nlayers = nlayers

    def init_weights(self):
        initrange = 0.1
        nn.init.uniform_(self.encoder.weight, -initrange, initrange)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -initrange, initrange)

    def forward(self, input, hidden):
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        output = self.drop(output)
        decoded = self.decoder(output)
        decoded = decoded.view(-1, self.ntoken)
        return F.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        if self.rnn_type == "LSTM":
            return (weight.new_zeros(self.nlayers, bsz, self.nhid),
                    weight.new_zeros(self.nlayers, bsz, self.nhid))
        else:
            return weight.new_zeros(self.nlayers, bsz, self.nhid)


class PositionalEncoding(nn.Module):
    """Sine/cosine positional encoding added to the token embeddings."""

    def __init__(self, d_model, dropout=0.1, max_len=5000):
        super(PositionalEncoding, self).__init__()
        self.dropout = nn.Dropout(p=dropout)
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        pe = pe.unsqueeze(0).transpose(0, 1)
        self.register_buffer("pe", pe)

    def forward(self, x):
        x = x + self.pe[: x.size(0), :]
        return self.dropout(x)


class TransformerModel(nn.Module):
    """Container module with an encoder, a TransformerEncoder, and a decoder."""

    def __init__(self, ntoken, ninp, nhead, nhid, nlayers, dropout=0.5):
        super(TransformerModel, self).__init__()
        self.model_type = "Transformer"
        self.src_mask = None
        self.pos_encoder = PositionalEncoding(ninp, dropout, max_len=64)
        encoder_layers = nn.TransformerEncoderLayer(ninp, nhead, nhid, dropout)
        self.transformer_encoder = nn.TransformerEncoder(
            encoder_layers, nlayers, enable_nested_tensor=False
        )
        self.encoder = nn.Embedding(ntoken, ninp)
        self.ninp = ninp
        self.decoder = nn.Linear(ninp, ntoken)
        self.init_weights()

    def init_weights(self):
        initrange = 0.1
        nn.init.uniform_(self.encoder.weight, -initrange, initrange)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -initrange, initrange)

    def forward(self, src, has_mask=True):
        if has_mask:
            device = src.device
            if self.src_mask is None or self.src_mask.size(0) != len(src):
                mask = nn.Transformer.generate_square_subsequent_mask(len(src)).to(device)
                self.src_mask = mask
        else:
            self.src_mask = None
        src = self.encoder(src) * math.sqrt(self.ninp)
        src = self.pos_encoder(src)
        output = self.transformer_encoder(src, self.src_mask)
        output = self.decoder(output)
        return F.log_softmax(output, dim=-1)


def batchify(data, bsz, device):
    nbatch = data.size(0) // bsz
    data = data.narrow(0, 0, nbatch * bsz)
    data = data.view(bsz, -1).t().contiguous()
    return data.to(device)


def repackage_hidden(h):
    """Wraps hidden states in new Tensors, to detach them from their history."""
    if isinstance(h, torch.Tensor):
        return h.detach()
    else:
        return tuple(repackage_hidden(v) for v in h)


def get_batch(source, i, bptt):
    seq_len = min(bptt, len(source) - 1 - i)
    data = source[i : i + seq_len]
    target = source[i + 1 : i + 1 + seq_len].view(-1)
    return data, target


def init_from_numpy(model, seed):
    """Redraw every weight with NumPy (keyed by name) for reproducible runs."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1 and "norm" in name and name.endswith("weight"):
                continue  # LayerNorm gains stay at one
            rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
            p.copy_(torch.from_numpy(rng.uniform(-0.1, 0.1, tuple(p.shape)).astype(np.float32)))


def make_corpus(n, ntokens, seed):
    """A token stream from a random sparse bigram model, so there is something to learn."""
    rng = np.random.default_rng(seed)
    nxt = rng.integers(0, ntokens, (ntokens, 3))
    ids = [0]
    for _ in range(n - 1):
        ids.append(int(nxt[ids[-1], rng.integers(0, 3)]))
    return torch.tensor(ids, dtype=torch.long)


def main(model="LSTM", steps=10, device=None, seed=1111, dropout=0.0):
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    torch.manual_seed(seed)
    ntokens, emsize, nhid, nlayers, nhead = 20, 16, 16, 2, 2
    batch_size, eval_batch_size, bptt, clip = 4, 2, 6, 0.25
    lr = 5.0 if model == "Transformer" else 20.0

    corpus = make_corpus(batch_size * bptt * steps + batch_size, ntokens, seed)
    val = make_corpus(60, ntokens, seed + 1)
    train_data = batchify(corpus, batch_size, device)
    val_data = batchify(val, eval_batch_size, device)

    if model == "Transformer":
        net = TransformerModel(ntokens, emsize, nhead, nhid, nlayers, dropout)
    else:
        net = RNNModel(model, ntokens, emsize, nhid, nlayers, dropout, tie_weights=True)
    init_from_numpy(net, seed)
    net = net.to(device)
    criterion = nn.NLLLoss()

    def evaluate(data_source):
        net.eval()
        total_loss = 0.0
        if model != "Transformer":
            hidden = net.init_hidden(eval_batch_size)
        with torch.no_grad():
            for i in range(0, data_source.size(0) - 1, bptt):
                data, targets = get_batch(data_source, i, bptt)
                if model == "Transformer":
                    output = net(data)
                    output = output.view(-1, ntokens)
                else:
                    output, hidden = net(data, hidden)
                    hidden = repackage_hidden(hidden)
                total_loss += len(data) * criterion(output, targets).item()
        return total_loss / (len(data_source) - 1)

    losses = []
    net.train()
    if model != "Transformer":
        hidden = net.init_hidden(batch_size)
    for batch, i in enumerate(range(0, train_data.size(0) - 1, bptt)):
        if batch == steps:
            break
        data, targets = get_batch(train_data, i, bptt)
        net.zero_grad()
        if model == "Transformer":
            output = net(data)
            output = output.view(-1, ntokens)
        else:
            hidden = repackage_hidden(hidden)
            output, hidden = net(data, hidden)
        loss = criterion(output, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), clip)
        for p in net.parameters():
            p.data.add_(p.grad, alpha=-lr)
        losses.append(loss.item())
        if batch == steps // 2:
            lr /= 4.0

    val_loss = evaluate(val_data)
    assert math.isfinite(val_loss) and math.isfinite(math.exp(val_loss))
    return losses


if __name__ == "__main__":
    for m in ("LSTM", "GRU", "Transformer"):
        print(m, main(m))
