#!/usr/bin/python3
"""Independent Python reference of Hugging Face's MarianMTModel forward pass, and the generator of the
tiny test fixture tests/data/marian-tiny/ that headcount's Marian importer is checked against.

Usage: marian_reference.py OUTDIR        (OUTDIR is normally tests/data/marian-tiny)

Written from the definitions in transformers/src/transformers/models/marian/ (modeling_marian.py,
tokenization_marian.py, convert_marian_to_pytorch.py) and PreTrainedModel.save_pretrained; no code of
theirs is used or imported (transformers is not needed). Needs the standard library, torch and
sentencepiece only. Everything is deterministic: weights come from Python's own Mersenne Twister with
fixed seeds (stable across Python and torch versions), SentencePiece is trained single-threaded.

What is written to OUTDIR:
  config.json, tokenizer_config.json         an opus-mt style configuration
  model.safetensors                          written by hand: the tensors save_pretrained would keep
  pytorch_model.bin                          torch.save of the state dict save_pretrained would write
  source.spm, target.spm, vocab.json         SentencePiece models and the joint Marian vocabulary
  reference.json                             tokenisation, teacher-forced logits, greedy decodes
  README.md                                  what it is and the conventions
"""
import io
import json
import math
import os
import random
import struct
import sys

import sentencepiece as spm
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
CORPUS = os.path.join(REPO, 'data', 'bible')

# Hugging Face sources the reference was written from (GitHub huggingface/transformers).
HF_SOURCES = {
    'src/transformers/models/marian/modeling_marian.py': '00b676f8f0489b88652a31d70751cc540dd06305',
    'src/transformers/models/marian/tokenization_marian.py (v4 line)': '9a6732442fc381e1ea815c511aa804f118c869be',
    'src/transformers/models/marian/tokenization_marian.py (newer main)': '025722be2ee1d09f37d75854362caf48e2457ce9',
    'src/transformers/models/marian/convert_marian_to_pytorch.py': '02c4e2b5e1a6bb75a6056dc7d47cb76696a324e1',
}

# ---------------------------------------------------------------------------------------------------
# Model shape. Names follow MarianConfig.
D_MODEL = 16
LAYERS = 2          # encoder_layers = decoder_layers
HEADS = 4           # encoder_attention_heads = decoder_attention_heads
FFN = 32            # encoder_ffn_dim = decoder_ffn_dim
MAX_POS = 64        # max_position_embeddings
LN_EPS = 1e-5       # nn.LayerNorm default, what MarianEncoderLayer/MarianDecoderLayer use
EOS, UNK = 0, 1     # Marian's vocab.yml order: "</s>" 0, "<unk>" 1; "<pad>" is appended last
WEIGHT_SEED = 24
# Added to final_logits_bias[</s>]. A random model's greedy output just repeats one token; this boost
# (chosen with WEIGHT_SEED by a small search) makes exactly one reference case stop at </s> mid-way, so
# that a test sees both an </s> stop and a run to the step limit, with every step's top-1/top-2 logit
# gap >= 0.02 and <pad> never the plain argmax.
EOS_BIAS_BOOST = 3.0
GREEDY_STEPS = 12

# SentencePiece training: the first lines of the bible corpus (public domain), small vocabularies.
SPM_LINES = 300
SPM_SOURCE_VOCAB = 80
SPM_TARGET_VOCAB = 72
SPM_COVERAGE = 0.98   # < 1 so that rare characters (e.g. "¿") are unknown and the <unk> path is tested

# Fallback text if the corpus is absent (the committed fixture was made from the corpus).
FALLBACK_ES = ['Y dijo Dios: Sea la luz: y fue la luz.', 'La tierra estaba desordenada y vacía.',
               'Y vio Dios que la luz era buena.', 'Y llamó Dios a la luz Día, y a las tinieblas Noche.']
FALLBACK_EN = ['God said, “Let there be light,” and there was light.', 'The earth was formless and empty.',
               'God saw the light, and saw that it was good.', 'God called the light “day”, and the darkness night.']

# Reference sentences (source, target used for teacher forcing).
# Unknown to source.spm: "¿", "?", "L", "”" -> <unk>. "“" is unknown to source.spm too, but it is a
# piece of target.spm, so vocab.json gives it that piece's id (MarianTokenizer looks pieces up by string
# in the joint vocabulary). SentencePiece merges adjacent unknown characters into one piece ("“S" would
# be one piece, and <unk>), hence "“luz".
CASES = [
    ('Y dijo Dios: “luz”.', 'God said.'),
    ('¿Dónde está el perro?', 'The dog?'),
    ('La tierra era buena.', 'The earth was good.'),
]
BATCH = [0, 2]   # a padded batch: cases of different source (and target) lengths
# Id sequences for the detokeniser alone (pieces named here, ids looked up in vocab.json): source-only
# pieces (unknown to target.spm, so decode_pieces keeps their "▁"), special ids to drop.
DETOKENIZE = [
    ['<pad>', '▁Dios', '▁the', '▁earth', '<unk>', '.', '</s>'],
    ['<pad>', '▁God', '▁tierra', 's', '▁and', '▁la', '</s>'],
]


# ---------------------------------------------------------------------------------------------------
# Tokeniser: SentencePiece models and the joint Marian vocabulary.

def corpus_lines(name, fallback):
    path = os.path.join(CORPUS, name)
    if os.path.exists(path):
        with open(path, encoding='utf-8') as f:
            lines = [l.rstrip('\n') for _, l in zip(range(SPM_LINES), f)]
        return lines, os.path.relpath(path, REPO)
    return fallback * (SPM_LINES // len(fallback)), 'built-in fallback text'


def train_spm(lines, vocab_size, out_path):
    """Trains a small unigram model from memory (no file paths end up in the model's trainer spec, so
    the bytes are reproducible). normalization_rule_name=identity keeps the file tiny (no nmt_nfkc
    character map, ~240 KB); the normaliser then only trims and collapses whitespace."""
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_writer=model, vocab_size=vocab_size, model_type='unigram',
        character_coverage=SPM_COVERAGE, normalization_rule_name='identity', num_threads=1, minloglevel=2)
    with open(out_path, 'wb') as f:
        f.write(model.getvalue())
    return spm.SentencePieceProcessor(model_file=out_path)


def build_vocab(sp_source, sp_target):
    """The joint piece -> id map (vocab.json) as opus-mt has it: Marian's vocab.yml order, "</s>" 0,
    "<unk>" 1, then the pieces, then "<pad>" appended last by convert_marian_to_pytorch
    (add_special_tokens_to_vocab / add_to_vocab_). SentencePiece's own control pieces (<s>, </s>, <unk>)
    are not separate entries: </s> and <unk> are the two fixed ids, <s> is unused by Marian."""
    vocab = {'</s>': EOS, '<unk>': UNK}
    for sp in (sp_source, sp_target):
        for i in range(sp.get_piece_size()):
            if sp.is_control(i) or sp.is_unknown(i):
                continue
            piece = sp.id_to_piece(i)
            if piece not in vocab:
                vocab[piece] = len(vocab)
    vocab['<pad>'] = len(vocab)
    return vocab


def encode(sp, vocab, text):
    """MarianTokenizer(text): spm.encode(text, out_type=str), each piece looked up in vocab.json (a piece
    missing from it -> <unk>), then </s> appended (build_inputs_with_special_tokens)."""
    pieces = sp.encode(text, out_type=str)
    ids = [vocab.get(p, UNK) for p in pieces] + [EOS]
    return pieces, ids


def decode(sp_target, inv_vocab, ids, pad):
    """MarianTokenizer.decode(ids, skip_special_tokens=True): ids -> pieces through vocab.json, special
    ids (</s>, <unk>, <pad>) dropped, the pieces joined by target.spm's decode_pieces. Newer
    transformers then replace any "▁" left in the string by a space (a piece unknown to the decoding
    spm model keeps its "▁"); older releases do not. Both are returned."""
    special = {EOS, UNK, pad}
    pieces = [inv_vocab[i] for i in ids if i not in special]
    raw = sp_target.decode_pieces(pieces)
    return pieces, raw.replace('▁', ' ').strip(), raw.strip()


# ---------------------------------------------------------------------------------------------------
# Parameters.

def fp32(x):
    """Rounds a Python float to the nearest float32 (the stored weights are float32)."""
    return struct.unpack('<f', struct.pack('<f', x))[0]


class ParamMaker:
    """Deterministic torch.float32 tensors drawn from random.Random (whose sequence does not depend on
    the torch version), each value rounded to float32."""

    def __init__(self, seed):
        self.rng = random.Random(seed)

    def normal(self, shape, mean, std):
        n = math.prod(shape)
        vals = [fp32(self.rng.gauss(mean, std)) for _ in range(n)]
        return torch.tensor(vals, dtype=torch.float32).reshape(shape)

    def uniform(self, shape, bound):
        n = math.prod(shape)
        vals = [fp32(self.rng.uniform(-bound, bound)) for _ in range(n)]
        return torch.tensor(vals, dtype=torch.float32).reshape(shape)


def sinusoidal_table(n_pos, dim):
    """MarianSinusoidalPositionalEmbedding._init_weight: angle(pos, j) = pos / 10000^(2*(j//2)/dim);
    the sines of the even j fill features [0, dim/2), the cosines of the odd j fill [dim/2, dim); i.e.
    feature i < dim/2 is sin(pos * 10000^(-2i/dim)) and feature dim/2 + i is cos of the same angle.
    Positions count from 0 (no offset, unlike BART's learned positions). HF computes it in float64 and
    stores it as float32; this returns the float32-rounded table, as the model holds it."""
    assert dim % 2 == 0
    half = dim // 2
    rows = []
    for pos in range(n_pos):
        angles = [pos / (10000 ** (2 * i / dim)) for i in range(half)]
        rows.append([fp32(math.sin(a)) for a in angles] + [fp32(math.cos(a)) for a in angles])
    return torch.tensor(rows, dtype=torch.float32)


def make_params(vocab_size):
    """Random weights with every term mattering: non-zero biases, layer norms around 1 / 0, a random
    final_logits_bias. Linear weights are [out, in] as nn.Linear stores them."""
    mk = ParamMaker(WEIGHT_SEED)
    p = {}

    def linear(prefix, n_in, n_out):
        p[prefix + '.weight'] = mk.uniform((n_out, n_in), 1.0 / math.sqrt(n_in) * math.sqrt(3.0))
        p[prefix + '.bias'] = mk.normal((n_out,), 0.0, 0.1)

    def layer_norm(prefix):
        p[prefix + '.weight'] = mk.normal((D_MODEL,), 1.0, 0.1)
        p[prefix + '.bias'] = mk.normal((D_MODEL,), 0.0, 0.1)

    def attention(prefix):
        # Definition order in MarianAttention: k_proj, v_proj, q_proj, out_proj.
        for name in ('k_proj', 'v_proj', 'q_proj', 'out_proj'):
            linear(f'{prefix}.{name}', D_MODEL, D_MODEL)

    p['final_logits_bias'] = mk.normal((1, vocab_size), 0.0, 0.5)
    p['final_logits_bias'][0, EOS] = fp32(float(p['final_logits_bias'][0, EOS]) + EOS_BIAS_BOOST)
    p['model.shared.weight'] = mk.normal((vocab_size, D_MODEL), 0.0, 0.3)
    for i in range(LAYERS):
        e = f'model.encoder.layers.{i}'
        attention(e + '.self_attn')
        layer_norm(e + '.self_attn_layer_norm')
        linear(e + '.fc1', D_MODEL, FFN)
        linear(e + '.fc2', FFN, D_MODEL)
        layer_norm(e + '.final_layer_norm')
    for i in range(LAYERS):
        d = f'model.decoder.layers.{i}'
        attention(d + '.self_attn')
        layer_norm(d + '.self_attn_layer_norm')
        attention(d + '.encoder_attn')
        layer_norm(d + '.encoder_attn_layer_norm')
        linear(d + '.fc1', D_MODEL, FFN)
        linear(d + '.fc2', FFN, D_MODEL)
        layer_norm(d + '.final_layer_norm')
    return p


def hf_state_dict(p):
    """MarianMTModel.state_dict() in its order (own buffer final_logits_bias, then model.*, then
    lm_head). The token embeddings are one tensor under four names (model.shared,
    model.{encoder,decoder}.embed_tokens, lm_head: share_encoder_decoder_embeddings and
    tie_word_embeddings). embed_positions are included here; savers drop them."""
    shared = p['model.shared.weight']
    pos = sinusoidal_table(MAX_POS, D_MODEL)
    sd = {'final_logits_bias': p['final_logits_bias'], 'model.shared.weight': shared,
          'model.encoder.embed_tokens.weight': shared, 'model.encoder.embed_positions.weight': pos}
    sd.update({k: v for k, v in p.items() if k.startswith('model.encoder.layers.')})
    sd['model.decoder.embed_tokens.weight'] = shared
    sd['model.decoder.embed_positions.weight'] = pos.clone()
    sd.update({k: v for k, v in p.items() if k.startswith('model.decoder.layers.')})
    sd['lm_head.weight'] = shared
    return sd


KEYS_TO_IGNORE_ON_SAVE = ['model.encoder.embed_positions.weight', 'model.decoder.embed_positions.weight']
TIED_WEIGHTS_KEYS = ['model.encoder.embed_tokens.weight', 'model.decoder.embed_tokens.weight', 'lm_head.weight']


def saved_state_dict(sd, safe):
    """What save_pretrained writes: MarianMTModel._keys_to_ignore_on_save (the sinusoidal tables) are
    dropped; for safetensors, which forbids aliasing, the aliases named in _tied_weights_keys are dropped
    too, so only model.shared.weight remains. torch.save keeps the aliases (one shared storage)."""
    out = {k: v for k, v in sd.items() if k not in KEYS_TO_IGNORE_ON_SAVE}
    if safe:
        out = {k: v for k, v in out.items() if k not in TIED_WEIGHTS_KEYS}
    return out


# ---------------------------------------------------------------------------------------------------
# safetensors, by hand.

def write_safetensors(path, tensors, metadata):
    """Format: u64 little-endian header size N, N bytes of JSON header (here padded with spaces to a
    multiple of 8, as the reference implementation does), then the raw little-endian data. The header
    maps each name to {"dtype", "shape", "data_offsets": [begin, end)} relative to the data start;
    "__metadata__" is a str -> str map. Tensors are laid out in name order."""
    header, blobs, offset = {'__metadata__': metadata}, [], 0
    for name in sorted(tensors):
        t = tensors[name].contiguous()
        assert t.dtype == torch.float32
        vals = t.reshape(-1).tolist()
        blob = struct.pack(f'<{len(vals)}f', *vals)
        header[name] = {'dtype': 'F32', 'shape': list(t.shape), 'data_offsets': [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header, separators=(',', ':')).encode('utf-8')
    text += b' ' * (-len(text) % 8)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def read_safetensors(path):
    """An independent reader, used to check the file."""
    with open(path, 'rb') as f:
        data = f.read()
    (n,) = struct.unpack('<Q', data[:8])
    header = json.loads(data[8:8 + n].decode('utf-8'))
    base = 8 + n
    meta = header.pop('__metadata__', None)
    out, end_max = {}, 0
    for name, info in header.items():
        assert info['dtype'] == 'F32'
        b, e = info['data_offsets']
        count = math.prod(info['shape'])
        assert e - b == 4 * count
        vals = struct.unpack(f'<{count}f', data[base + b:base + e])
        out[name] = torch.tensor(vals, dtype=torch.float32).reshape(info['shape'])
        end_max = max(end_max, e)
    assert base + end_max == len(data), 'trailing bytes in the safetensors file'
    return out, meta


# ---------------------------------------------------------------------------------------------------
# The reference forward pass (float64), written from modeling_marian.py.

def layer_norm(x, p, prefix):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)          # biased variance, as nn.LayerNorm
    return (x - mean) / torch.sqrt(var + LN_EPS) * p[prefix + '.weight'] + p[prefix + '.bias']


def linear(x, p, prefix):
    return x @ p[prefix + '.weight'].T + p[prefix + '.bias']


def attention(x, kv, allowed, p, prefix):
    """MarianAttention (eager): q = q_proj(x) * head_dim^-0.5 (the bias is scaled too), k = k_proj(kv),
    v = v_proj(kv), per-head softmax(q k^T + mask) v, heads concatenated, out_proj. allowed: bool
    [B, Tq, Tk]; masked scores get -inf (HF adds finfo.min; both give exactly zero weight)."""
    b, tq, _ = x.shape
    tk = kv.shape[1]
    hd = D_MODEL // HEADS
    q = linear(x, p, prefix + '.q_proj') * hd ** -0.5
    k = linear(kv, p, prefix + '.k_proj')
    v = linear(kv, p, prefix + '.v_proj')
    q = q.view(b, tq, HEADS, hd).transpose(1, 2)
    k = k.view(b, tk, HEADS, hd).transpose(1, 2)
    v = v.view(b, tk, HEADS, hd).transpose(1, 2)
    scores = q @ k.transpose(-1, -2)
    scores = scores.masked_fill(~allowed[:, None, :, :], float('-inf'))
    out = torch.softmax(scores, dim=-1) @ v
    out = out.transpose(1, 2).reshape(b, tq, D_MODEL)
    return linear(out, p, prefix + '.out_proj')


def swish(x):
    return x * torch.sigmoid(x)     # ACT2FN["swish"] = SiLU


def embed(ids, p, pos):
    """inputs_embeds = embed_tokens(ids) * sqrt(d_model) (scale_embedding), plus the sinusoidal position
    rows 0..T-1 (not scaled). No layernorm_embedding (normalize_embedding false), no dropout at eval."""
    return p['model.shared.weight'][ids] * math.sqrt(D_MODEL) + pos[:ids.shape[1]]


def encoder(ids, mask, p, pos):
    """Post-norm layers (MarianEncoderLayer): h = LN(h + SelfAttn(h)); h = LN(h + fc2(swish(fc1(h)))).
    mask [B, S] (1 = token, 0 = padding) hides padded keys. No final encoder layer norm."""
    h = embed(ids, p, pos)
    allowed = mask.bool()[:, None, :].expand(-1, ids.shape[1], -1)
    for i in range(LAYERS):
        e = f'model.encoder.layers.{i}'
        h = layer_norm(h + attention(h, h, allowed, p, e + '.self_attn'), p, e + '.self_attn_layer_norm')
        h = layer_norm(h + linear(swish(linear(h, p, e + '.fc1')), p, e + '.fc2'), p, e + '.final_layer_norm')
    return h


def decoder_logits(dec_ids, enc, enc_mask, p, pos):
    """MarianDecoderLayer: h = LN(h + causal SelfAttn(h)); h = LN(h + CrossAttn(h, enc));
    h = LN(h + FFN(h)). decoder_attention_mask is None (HF default): causal mask only.
    lm_logits = h @ shared^T (lm_head tied, no bias) + final_logits_bias."""
    t = dec_ids.shape[1]
    h = embed(dec_ids, p, pos)
    causal = torch.ones(t, t, dtype=torch.bool).tril()[None].expand(dec_ids.shape[0], -1, -1)
    cross = enc_mask.bool()[:, None, :].expand(-1, t, -1)
    for i in range(LAYERS):
        d = f'model.decoder.layers.{i}'
        h = layer_norm(h + attention(h, h, causal, p, d + '.self_attn'), p, d + '.self_attn_layer_norm')
        h = layer_norm(h + attention(h, enc, cross, p, d + '.encoder_attn'), p, d + '.encoder_attn_layer_norm')
        h = layer_norm(h + linear(swish(linear(h, p, d + '.fc1')), p, d + '.fc2'), p, d + '.final_layer_norm')
    return h @ p['model.shared.weight'].T + p['final_logits_bias'][0]


def greedy(src_ids, p, pos, pad):
    """Greedy decoding as HF generate(num_beams=1) with the opus-mt config: start from
    decoder_start_token_id (= pad), at each step take the argmax of the last position's logits with
    <pad> banned (config bad_words_ids [[pad]]), stop after </s> or after GREEDY_STEPS tokens.
    forced_eos_token_id is NOT applied (with max_new_tokens=GREEDY_STEPS, HF would force </s> as the
    last token).
    Each step re-runs the decoder on the whole prefix (no cache). Returns ids (with the leading
    start token, as generate's output) and, per step, the top-1 minus top-2 logit margin and whether
    the unbanned argmax would have picked the same token."""
    src = torch.tensor([src_ids])
    mask = torch.ones_like(src)
    enc = encoder(src, mask, p, pos)
    out, margins, agrees = [pad], [], True
    for _ in range(GREEDY_STEPS):
        logits = decoder_logits(torch.tensor([out]), enc, mask, p, pos)[0, -1]
        agrees = agrees and int(logits.argmax()) != pad
        banned = logits.clone()
        banned[pad] = float('-inf')
        top2 = torch.topk(banned, 2).values
        margins.append(float(top2[0] - top2[1]))
        nxt = int(banned.argmax())
        out.append(nxt)
        if nxt == EOS:
            break
    return out, min(margins), agrees


# ---------------------------------------------------------------------------------------------------
# Checks against torch's own transformer layers (an independent formulation of the same post-norm
# layers: nn.MultiheadAttention also scales q after the biased projection).

def torch_layers_check(p, pos, src, src_mask, dec):
    """Runs the same weights through nn.TransformerEncoderLayer / nn.TransformerDecoderLayer (float64,
    post-norm, SiLU, eps 1e-5) and returns (encoder output, logits) for comparison."""
    import torch.nn as nn

    def block(cls, prefix, attn, norms):
        m = cls(D_MODEL, HEADS, FFN, dropout=0.0, activation=nn.functional.silu, layer_norm_eps=LN_EPS,
                batch_first=True, norm_first=False).double().eval()
        for mha, name in zip(attn, ('self_attn', 'encoder_attn')):
            load_mha(getattr(m, mha), p, f'{prefix}.{name}')
        load_lin(m.linear1, p, prefix + '.fc1')
        load_lin(m.linear2, p, prefix + '.fc2')
        for i, name in enumerate(norms, 1):
            load_lin(getattr(m, f'norm{i}'), p, f'{prefix}.{name}')
        return m

    enc_layers = [block(nn.TransformerEncoderLayer, f'model.encoder.layers.{i}', ['self_attn'],
                        ['self_attn_layer_norm', 'final_layer_norm']) for i in range(LAYERS)]
    dec_layers = [block(nn.TransformerDecoderLayer, f'model.decoder.layers.{i}', ['self_attn', 'multihead_attn'],
                        ['self_attn_layer_norm', 'encoder_attn_layer_norm', 'final_layer_norm'])
                  for i in range(LAYERS)]
    with torch.no_grad():
        key_pad = ~src_mask.bool()
        enc = embed(src, p, pos)
        for m in enc_layers:
            enc = m(enc, src_key_padding_mask=key_pad)
        t = dec.shape[1]
        causal = torch.triu(torch.full((t, t), float('-inf'), dtype=torch.float64), 1)
        h = embed(dec, p, pos)
        for m in dec_layers:
            h = m(h, enc, tgt_mask=causal, memory_key_padding_mask=key_pad)
        logits = h @ p['model.shared.weight'].T + p['final_logits_bias'][0]
    return enc, logits


def load_lin(module, p, prefix):
    module.weight.data.copy_(p[prefix + '.weight'])
    module.bias.data.copy_(p[prefix + '.bias'])


def load_mha(mha, p, prefix):
    mha.in_proj_weight.data.copy_(torch.cat([p[f'{prefix}.{n}_proj.weight'] for n in 'qkv']))
    mha.in_proj_bias.data.copy_(torch.cat([p[f'{prefix}.{n}_proj.bias'] for n in 'qkv']))
    load_lin(mha.out_proj, p, prefix + '.out_proj')


# ---------------------------------------------------------------------------------------------------

def config_json(vocab_size, pad):
    """The keys an opus-mt config.json has (as convert_marian_to_pytorch writes MarianConfig)."""
    return {
        'activation_dropout': 0.0,
        'activation_function': 'swish',
        'add_bias_logits': False,
        'add_final_layer_norm': False,
        'architectures': ['MarianMTModel'],
        'attention_dropout': 0.0,
        'bad_words_ids': [[pad]],
        'bos_token_id': 0,
        'classif_dropout': 0.0,
        'classifier_dropout': 0.0,
        'd_model': D_MODEL,
        'decoder_attention_heads': HEADS,
        'decoder_ffn_dim': FFN,
        'decoder_layerdrop': 0.0,
        'decoder_layers': LAYERS,
        'decoder_start_token_id': pad,
        'decoder_vocab_size': vocab_size,
        'dropout': 0.1,
        'encoder_attention_heads': HEADS,
        'encoder_ffn_dim': FFN,
        'encoder_layerdrop': 0.0,
        'encoder_layers': LAYERS,
        'eos_token_id': EOS,
        'forced_eos_token_id': EOS,
        'init_std': 0.02,
        'is_encoder_decoder': True,
        'max_length': 512,
        'max_position_embeddings': MAX_POS,
        'model_type': 'marian',
        'normalize_before': False,
        'normalize_embedding': False,
        'num_beams': 4,
        'num_hidden_layers': LAYERS,
        'pad_token_id': pad,
        'scale_embedding': True,
        'share_encoder_decoder_embeddings': True,
        'static_position_embeddings': True,
        'torch_dtype': 'float32',
        'use_cache': True,
        'vocab_size': vocab_size,
    }


def rows(t):
    """A tensor as nested lists of Python floats (json writes them with repr: exact float64)."""
    return t.tolist()


def to_json(value, indent=0):
    """JSON with one line per innermost list of numbers (a logits row), indented structure elsewhere.
    Floats are written by json, i.e. as repr(float): the shortest string that reads back exactly."""
    pad = ' ' * indent
    if isinstance(value, dict):
        if not value:
            return '{}'
        items = [f'{pad} {json.dumps(k)}: {to_json(v, indent + 1)}' for k, v in value.items()]
        return '{\n' + ',\n'.join(items) + '\n' + pad + '}'
    if isinstance(value, list) and any(isinstance(v, (list, dict)) for v in value):
        items = [f'{pad} {to_json(v, indent + 1)}' for v in value]
        return '[\n' + ',\n'.join(items) + '\n' + pad + ']'
    return json.dumps(value, ensure_ascii=False, separators=(',', ':'))


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.set_num_threads(1)

    # Tokenisers.
    es, es_from = corpus_lines('train.es', FALLBACK_ES)
    en, en_from = corpus_lines('train.en', FALLBACK_EN)
    sp_src = train_spm(es, SPM_SOURCE_VOCAB, os.path.join(out, 'source.spm'))
    sp_tgt = train_spm(en, SPM_TARGET_VOCAB, os.path.join(out, 'target.spm'))
    vocab = build_vocab(sp_src, sp_tgt)
    inv_vocab = {i: k for k, i in vocab.items()}
    V = len(vocab)
    pad = vocab['<pad>']
    assert pad == V - 1 and sorted(vocab.values()) == list(range(V))
    with open(os.path.join(out, 'vocab.json'), 'w', encoding='utf-8') as f:
        json.dump(vocab, f, ensure_ascii=False, indent=2)
        f.write('\n')
    with open(os.path.join(out, 'tokenizer_config.json'), 'w', encoding='utf-8') as f:
        json.dump({'source_lang': 'es', 'target_lang': 'en', 'separate_vocabs': False}, f, indent=2)
        f.write('\n')

    # Weights and files.
    params = make_params(V)
    sd = hf_state_dict(params)
    with open(os.path.join(out, 'config.json'), 'w', encoding='utf-8') as f:
        json.dump(config_json(V, pad), f, indent=2)
        f.write('\n')
    st_path = os.path.join(out, 'model.safetensors')
    write_safetensors(st_path, saved_state_dict(sd, safe=True), {'format': 'pt'})
    bin_path = os.path.join(out, 'pytorch_model.bin')
    torch.save(saved_state_dict(sd, safe=False), bin_path)

    # File checks: both files read back to the same float32 tensors.
    st, meta = read_safetensors(st_path)
    assert meta == {'format': 'pt'}
    assert set(st) == set(saved_state_dict(sd, safe=True))
    for k, v in st.items():
        assert torch.equal(v, sd[k]), k
    loaded = torch.load(bin_path, map_location='cpu')
    assert list(loaded) == list(saved_state_dict(sd, safe=False))
    for k, v in loaded.items():
        assert v.dtype == torch.float32 and torch.equal(v, sd[k]), k
    tied = [loaded[k].data_ptr() for k in ['model.shared.weight'] + TIED_WEIGHTS_KEYS]
    assert len(set(tied)) == 1, 'tied embeddings should share one storage in pytorch_model.bin'

    # The float64 reference, computed from the float32 weights.
    p = {k: v.double() for k, v in params.items()}
    pos = sinusoidal_table(MAX_POS, D_MODEL).double()
    assert pos[0, :D_MODEL // 2].abs().max() == 0 and pos[0, D_MODEL // 2:].eq(1).all()

    cases, max_torch_diff = [], 0.0
    for src_text, tgt_text in CASES:
        src_pieces, src_ids = encode(sp_src, vocab, src_text)
        tgt_pieces, tgt_ids = encode(sp_tgt, vocab, tgt_text)
        dec_in = [pad] + tgt_ids[:-1]            # shift_tokens_right(labels = tgt_ids) with start = pad
        src = torch.tensor([src_ids])
        mask = torch.ones_like(src)
        dec = torch.tensor([dec_in])
        with torch.no_grad():
            enc = encoder(src, mask, p, pos)
            logits = decoder_logits(dec, enc, mask, p, pos)
        t_enc, t_logits = torch_layers_check(p, pos, src, mask, dec)
        max_torch_diff = max(max_torch_diff, float((t_enc - enc).abs().max()), float((t_logits - logits).abs().max()))
        g_ids, g_margin, g_agrees = greedy(src_ids, p, pos, pad)
        g_pieces, g_text, g_text_raw = decode(sp_tgt, inv_vocab, g_ids, pad)
        cases.append({
            'source': src_text,
            'source_pieces': src_pieces,
            'input_ids': src_ids,
            'target': tgt_text,
            'target_pieces': tgt_pieces,
            'labels': tgt_ids,
            'decoder_input_ids': dec_in,
            'encoder_last_hidden_state': rows(enc[0]),
            'logits': rows(logits[0]),
            'greedy': {
                'output_ids': g_ids,
                'pieces': g_pieces,
                'text': g_text,
                'text_without_underline_replace': g_text_raw,
                'stopped_at_eos': g_ids[-1] == EOS,
                'min_top2_margin': g_margin,
                'unbanned_argmax_agrees': g_agrees,
            },
        })
    assert max_torch_diff < 1e-12, max_torch_diff
    # The same forward in float32 from the tensors read back out of model.safetensors: how far a
    # float32 implementation lands from the float64 reference (a guide for test tolerances).
    f32_diff = 0.0
    for c in cases:
        src = torch.tensor([c['input_ids']])
        with torch.no_grad():
            enc32 = encoder(src, torch.ones_like(src), st, pos.float())
            lg32 = decoder_logits(torch.tensor([c['decoder_input_ids']]), enc32, torch.ones_like(src), st, pos.float())
        f32_diff = max(f32_diff, float((lg32[0].double() - torch.tensor(c['logits'], dtype=torch.float64)).abs().max()))
    assert f32_diff < 1e-4, f32_diff
    # The greedy cases the seed and EOS_BIAS_BOOST were chosen for: one </s> stop and one run to the
    # limit, no near-ties (a float32 implementation must pick the same tokens), <pad> never the argmax.
    stops = [c['greedy']['stopped_at_eos'] for c in cases]
    assert any(stops) and not all(stops), stops
    assert all(c['greedy']['min_top2_margin'] >= 0.02 and c['greedy']['unbanned_argmax_agrees'] for c in cases)

    # A padded batch: sources right-padded with <pad> and attention_mask 0 there; decoder inputs
    # right-padded with <pad> too, decoder_attention_mask None (HF default, so only the causal mask).
    chosen = [cases[i] for i in BATCH]
    s_len = max(len(c['input_ids']) for c in chosen)
    t_len = max(len(c['decoder_input_ids']) for c in chosen)
    b_src = [c['input_ids'] + [pad] * (s_len - len(c['input_ids'])) for c in chosen]
    b_mask = [[1] * len(c['input_ids']) + [0] * (s_len - len(c['input_ids'])) for c in chosen]
    b_dec = [c['decoder_input_ids'] + [pad] * (t_len - len(c['decoder_input_ids'])) for c in chosen]
    assert len({len(c['input_ids']) for c in chosen}) > 1, 'the batch must need source padding'
    with torch.no_grad():
        enc = encoder(torch.tensor(b_src), torch.tensor(b_mask), p, pos)
        b_logits = decoder_logits(torch.tensor(b_dec), enc, torch.tensor(b_mask), p, pos)
    t_enc, t_logits = torch_layers_check(p, pos, torch.tensor(b_src), torch.tensor(b_mask), torch.tensor(b_dec))
    valid_enc = torch.tensor(b_mask).bool()[:, :, None]
    assert float(((t_enc - enc) * valid_enc).abs().max()) < 1e-12
    assert float((t_logits - b_logits).abs().max()) < 1e-12
    # Padding must not change the valid positions: compare with the single-sentence results.
    batch_vs_single = 0.0
    for r, c in enumerate(chosen):
        n = len(c['decoder_input_ids'])
        single = torch.tensor(c['logits'], dtype=torch.float64)
        batch_vs_single = max(batch_vs_single, float((b_logits[r, :n] - single).abs().max()))
    assert batch_vs_single < 1e-12, batch_vs_single
    batch = {
        'cases': BATCH,
        'input_ids': b_src,
        'attention_mask': b_mask,
        'decoder_input_ids': b_dec,
        'decoder_attention_mask': None,
        'decoder_lengths': [len(c['decoder_input_ids']) for c in chosen],
        'logits': rows(b_logits),
    }

    detokenize = []
    for names in DETOKENIZE:
        ids = [vocab[n] for n in names]
        pieces, text, text_raw = decode(sp_tgt, inv_vocab, ids, pad)
        detokenize.append({'ids': ids, 'pieces': pieces, 'text': text, 'text_without_underline_replace': text_raw})
    # HF's clean_up_tokenization (on by default in v4 decode) must have nothing to change.
    for item in detokenize + [c['greedy'] for c in cases]:
        for text in (item['text'], item['text_without_underline_replace']):
            assert not any(x in text for x in (' .', ' ,', ' ?', ' !', " '", " n't")), text

    reference = {
        'description': 'Reference outputs of the tiny random MarianMTModel in this folder; logits are '
                       'float64 computed from the float32 weights (see README.md).',
        'generator': 'tests/reference/marian_reference.py',
        'vocab_size': V, 'pad_token_id': pad, 'eos_token_id': EOS, 'unk_token_id': UNK,
        'decoder_start_token_id': pad,
        'greedy_max_new_tokens': GREEDY_STEPS,
        'checks': {'max_abs_diff_vs_torch_nn_transformer_layers': max_torch_diff,
                   'max_abs_diff_batch_vs_single': batch_vs_single,
                   'max_abs_diff_float32_forward': f32_diff},
        'cases': cases,
        'batch': batch,
        'detokenize': detokenize,
    }
    with open(os.path.join(out, 'reference.json'), 'w', encoding='utf-8') as f:
        f.write(to_json(reference) + '\n')
    with open(os.path.join(out, 'reference.json'), encoding='utf-8') as f:
        assert json.load(f) == json.loads(json.dumps(reference)), 'reference.json does not read back'


    with open(os.path.join(out, 'README.md'), 'w', encoding='utf-8') as f:
        f.write(readme(V, pad, es_from, en_from))

    for name in sorted(os.listdir(out)):
        print(f'{os.path.getsize(os.path.join(out, name)):>8}  {name}')
    for c in cases:
        g = c['greedy']
        print(f"{c['source']!r}: {len(c['input_ids'])} source ids, greedy {g['output_ids']} "
              f"eos={g['stopped_at_eos']} margin={g['min_top2_margin']:.4f} text={g['text']!r}")
    print(f'vocab {V}, torch-layer check {max_torch_diff:.2e}, batch vs single {batch_vs_single:.2e}, '
          f'float32 forward {f32_diff:.2e}')


def readme(V, pad, es_from, en_from):
    commits = '\n'.join(f'- `{path}` at `{sha}`' for path, sha in HF_SOURCES.items())
    return f"""# marian-tiny: a tiny random MarianMTModel and its reference outputs

A Hugging Face MarianMT model folder (opus-mt layout) with random weights, small enough to commit, and
`reference.json`, the outputs of an independent Python reference of MarianMTModel's forward pass, for
testing headcount's Marian importer. The weights mean nothing; the tokenisers are real SentencePiece
models.

Made by (from the repository root; `/usr/bin/python3` with Debian 12's python3-torch 1.13 and
python3-sentencepiece 0.1.97; no transformers):

    /usr/bin/python3 tests/reference/marian_reference.py tests/data/marian-tiny

The script is deterministic (weights from Python's `random.Random({WEIGHT_SEED})`, SentencePiece trained
single-threaded from memory; two runs give identical bytes) and checks its own output: both weight
files read back bit-identically, its layers agree with torch's `nn.TransformerEncoderLayer` /
`nn.TransformerDecoderLayer` (post-norm, SiLU) to 1e-12, the padded batch equals the single sentences
at the valid positions, and a float32 run from `model.safetensors` is within 1e-4 of the float64
logits (`checks` in reference.json has the numbers).

Written from these Hugging Face transformers sources (github.com/huggingface/transformers):

{commits}

and `PreTrainedModel.save_pretrained` (modeling_utils.py) for which tensors a saved model holds.

## Files

- `config.json`: d_model {D_MODEL}, {LAYERS} encoder and {LAYERS} decoder layers, {HEADS} heads, ffn {FFN},
  activation `swish`, `scale_embedding` true, `static_position_embeddings` true,
  `max_position_embeddings` {MAX_POS}, `vocab_size` = `decoder_vocab_size` = {V},
  `share_encoder_decoder_embeddings` true, `normalize_before` / `normalize_embedding` false,
  `pad_token_id` = `decoder_start_token_id` = {pad}, `eos_token_id` {EOS}, `forced_eos_token_id` {EOS},
  `bad_words_ids` [[{pad}]], `num_beams` 4, `max_length` 512: the keys convert_marian_to_pytorch gives
  an opus-mt config. `tie_word_embeddings` is absent (HF's default: true). Real opus-mt configs have
  `max_position_embeddings` = d_model (the converter sets it so; 512).
- `model.safetensors`: written by hand (u64 LE header length, JSON header padded with spaces to a
  multiple of 8, `"__metadata__": {{"format": "pt"}}`, F32 little-endian data in name order). It holds
  what `save_pretrained` keeps: `final_logits_bias` [1, {V}], `model.shared.weight` [{V}, {D_MODEL}] and the
  layer tensors (`model.{{encoder,decoder}}.layers.N.self_attn.{{q,k,v,out}}_proj.{{weight,bias}}`,
  `self_attn_layer_norm`, decoder `encoder_attn.*` and `encoder_attn_layer_norm`, `fc1`, `fc2`,
  `final_layer_norm`; Linear weights are [out, in]). Not present: `model.encoder.embed_tokens.weight`,
  `model.decoder.embed_tokens.weight`, `lm_head.weight` (aliases of `model.shared.weight`, dropped
  because safetensors forbids aliasing and they match `_tied_weights_keys`) and
  `model.{{encoder,decoder}}.embed_positions.weight` (`MarianMTModel._keys_to_ignore_on_save`: the
  importer computes them).
- `pytorch_model.bin`: `torch.save` of what `save_pretrained(safe_serialization=False)` writes: the
  same tensors plus the three aliases, which share one storage with `model.shared.weight`; no
  `embed_positions` either (checkpoints saved by older transformers may carry them).
- `source.spm`, `target.spm`: SentencePiece unigram models ({SPM_SOURCE_VOCAB} and {SPM_TARGET_VOCAB} pieces,
  character_coverage {SPM_COVERAGE}, normalization `identity`), trained on the first {SPM_LINES} lines of
  `{es_from}` and `{en_from}`.
- `vocab.json`: the joint piece -> id map MarianTokenizer reads: `"</s>"` 0, `"<unk>"` 1, the pieces of
  source.spm then the pieces of target.spm not already there (SentencePiece's control pieces `<s>`,
  `</s>`, `<unk>` are not repeated), `"<pad>"` last = {pad}. Ids in this map are not SentencePiece ids.
- `tokenizer_config.json`: source/target language, `separate_vocabs` false.
- `reference.json`:
  - `cases`: per sentence, the source text, its pieces and `input_ids`, a teacher-forcing target
    (`labels` = target.spm pieces' ids + `</s>`, `decoder_input_ids` = `[{pad}] + labels[:-1]`), the
    encoder output `encoder_last_hidden_state` [S, {D_MODEL}], the logits [T, {V}] and a greedy decode.
  - `batch`: cases {BATCH} in one batch: `input_ids` right-padded with `<pad>` ({pad}) and
    `attention_mask` 0 there; `decoder_input_ids` right-padded with `<pad>`, `decoder_attention_mask`
    null (HF's default: causal mask only); `logits` [2, T, {V}] for every position (`decoder_lengths`
    says which are real; those equal the single-sentence logits).
  - `detokenize`: id sequences with source-only pieces and special ids, and their text.
  - Numbers are float64 `repr`s (exact), computed in float64 from the float32 weights.

## Weights

Random, so that every term matters: Linear weights uniform(±sqrt(3/fan_in)), biases N(0, 0.1),
LayerNorm weights N(1, 0.1) and biases N(0, 0.1), `model.shared.weight` N(0, 0.3) including the `<pad>`
row (converted opus-mt models have a zero `<pad>` row and a zero `final_logits_bias` entry for it; here
both are random), `final_logits_bias` N(0, 0.5) with {EOS_BIAS_BOOST} added at `</s>` so that one case's
greedy decode stops at `</s>` (a random model otherwise repeats one token for ever).

## Conventions (as in modeling_marian.py)

- Embedding: `embed_tokens(ids) * sqrt(d_model)` (scale_embedding), then the position rows added
  unscaled; the same for encoder and decoder, with the one shared matrix. No embedding layer norm,
  no final encoder/decoder layer norm, dropout off.
- Positions: static sinusoids (`MarianSinusoidalPositionalEmbedding`), positions counted from 0 (no
  offset of 2 as in BART; padding does not shift them). Feature i < d/2 is sin(pos / 10000^(2i/d)),
  feature d/2 + i is cos(pos / 10000^(2i/d)): sines in the first half, cosines in the second, not
  interleaved. Row 0 is d/2 zeros then d/2 ones. HF computes the table in float64 and holds it as
  float32; so does this reference.
- Layers are post-norm: `h = LN(h + sublayer(h))` for self-attention, (decoder) cross-attention and the
  FFN `fc2(swish(fc1(h)))`, swish = SiLU = x * sigmoid(x). LayerNorm eps 1e-5 (biased variance).
- Attention: `q = q_proj(x) * head_dim^-0.5` (bias included in the scaling), `k`, `v` from their
  projections, heads split as `view(B, T, heads, head_dim)`, softmax over keys, `out_proj`. Encoder keys
  and cross-attention keys with `attention_mask` 0 are masked; decoder self-attention is causal only.
- Logits: `h @ model.shared.weight^T + final_logits_bias` (lm_head tied to the shared embedding, no bias
  of its own; `final_logits_bias` is a buffer [1, V]; a checkpoint without it loads with zeros, it is in
  `_keys_to_ignore_on_load_missing`).
- Decoder start: `decoder_start_token_id` = `pad_token_id` = {pad}; teacher forcing is
  `shift_tokens_right(labels)`.
- Greedy (`greedy` in reference.json): start from [{pad}], argmax of the last position with `<pad>`
  banned (the config's `bad_words_ids`), stop after `</s>` (kept in `output_ids`) or after
  {GREEDY_STEPS} new tokens. `forced_eos_token_id` is not applied (HF `generate(num_beams=1,
  max_new_tokens={GREEDY_STEPS})` would force `</s>` as the last token, and plain `generate()` would use the
  config's `num_beams` 4). `min_top2_margin` is the smallest gap between the best and second-best logit
  over the steps (all >= 0.02); `unbanned_argmax_agrees` says a plain argmax gives the same tokens.

## Tokeniser (as in tokenization_marian.py)

- Encoding: `source.spm.encode(text, out_type=str)`; every piece is looked up by string in vocab.json,
  a piece not there -> `<unk>` ({UNK}); then `</s>` ({EOS}) is appended; no `<s>`. A character the spm
  model does not know comes out as its own surface string (adjacent unknown characters merge into one
  piece: `“S` would be one piece). Such a string gets `<unk>` unless it is a piece of the other model:
  case 0's `“` is unknown to source.spm but a target.spm piece, so it gets that piece's id, not `<unk>`.
  MarianTokenizer's Moses punctuation normaliser is not applied by `__call__`. The newer main
  tokenizer (025722be) instead falls back to `spm.piece_to_id(piece)` for a piece missing from
  vocab.json, which is the spm `<unk>` id 0, i.e. Marian's `</s>`; this fixture follows the v4
  behaviour (`<unk>`), which is also Marian's.
- Decoding with `skip_special_tokens`: ids -> pieces via vocab.json, `</s>`, `<unk>` and `<pad>`
  dropped, `target.spm.decode_pieces(pieces)`, then "▁" -> " " and strip (`text`). A piece that
  target.spm does not know (a source-only piece) keeps its "▁" in `decode_pieces`; the v4 tokenizer
  leaves it there (`text_without_underline_replace`), the newer main one replaces it (and decodes with
  source.spm when the vocabulary is shared, which gives the same `text`). No text here contains a
  sequence that `clean_up_tokenization_spaces` would change (" .", " ,", " ?", " !", " '", " n't").
"""


if __name__ == '__main__':
    main()
