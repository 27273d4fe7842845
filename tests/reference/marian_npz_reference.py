#!/usr/bin/python3
"""Variants of the tiny random MarianMT model of tests/data/marian-tiny, with the outputs of the
independent float64 reference of marian_reference.py on each: Marian's native checkpoint layout
(model.npz, vocab.yml, decoder.yml, source.spm, target.spm, as OPUS-MT releases its models); a
Hugging Face folder with separate source and target vocabularies (vocab.json, target_vocab.json,
share_encoder_decoder_embeddings false), and the same in Marian's layout (two vocab.yml,
encoder_Wemb and decoder_Wemb); and small .npz files that check headcount's NumPy reader.

Usage: marian_npz_reference.py TINY OUTDIR NPZDIR SEPARATEDIR SEPARATENPZDIR
       (normally tests/data/marian-tiny tests/data/marian-tiny-npz tests/data/npz
        tests/data/marian-tiny-separate tests/data/marian-tiny-separate-npz)

The layout is the inverse of transformers' convert_marian_to_pytorch.py (the commit in
marian_reference.HF_SOURCES), written from it and from Marian's own naming (no code of theirs used):
  Wemb [V-1, d]                      the shared embeddings without the <pad> row that HF appends
  decoder_ff_logit_out_b [1, V-1]    final_logits_bias without its <pad> entry
  {encoder,decoder}_l{i+1}_{self,context}_{Wq,Wk,Wv,Wo} [d, d]   nn.Linear weights transposed
  ..._{bq,bk,bv,bo} [1, d], ..._Wo_ln_{scale,bias} [1, d]        the layer norm after the block
  ..._ffn_W1 [d, ffn], _ffn_b1 [1, ffn], _ffn_W2 [ffn, d], _ffn_b2 [1, d], _ffn_ffn_ln_{scale,bias}
  special:model.yml                  the model's YAML configuration as bytes, NUL-terminated
vocab.yml maps each piece to its id (vocab.json without "<pad>"); decoder.yml names the model and
vocabularies as Marian's decoder config does.

Since HF's converter gives <pad> a zero embedding and a zero logit bias, the reference outputs here
come from marian-tiny's weights with that row and that entry zeroed (marian-tiny's own random pad
row differs): reference.json holds the teacher-forced logits and the greedy decodes of
marian-tiny's cases for that model. Needs numpy, torch and the standard library.
"""
import json
import os
import sys
import zipfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import marian_reference as ref  # noqa: E402

MODEL_YML = """type: transformer
dim-emb: {d}
dim-vocabs:
  - {v}
  - {v}
enc-depth: {layers}
dec-depth: {layers}
transformer-heads: {heads}
transformer-dim-ffn: {ffn}
transformer-ffn-depth: 2
transformer-ffn-activation: swish
transformer-preprocess: ""
transformer-postprocess: dan
transformer-postprocess-emb: d
transformer-decoder-autoreg: self-attention
transformer-train-position-embeddings: false
transformer-aan-depth: 2
transformer-aan-nogate: false
transformer-no-projection: false
tied-embeddings: true
tied-embeddings-src: false
tied-embeddings-all: {tied_all}
layer-normalization: false
right-left: false
ulr-dim-emb: 0
dec-cell-base-depth: 2
dec-cell-high-depth: 1
version: v1.9.0 (headcount test fixture)
"""

DECODER_YML = """models:
  - model.npz
vocabs:
  - {src}
  - {tgt}
beam-size: 4
normalize: 1
word-penalty: 0
mini-batch: 16
maxi-batch: 100
maxi-batch-sort: src
relative-paths: true
"""

LAYER_BLOCKS = {  # Marian's suffix -> (HF module, parameter)
    'Wq': ('q_proj', 'weight'), 'Wk': ('k_proj', 'weight'), 'Wv': ('v_proj', 'weight'),
    'Wo': ('out_proj', 'weight'), 'bq': ('q_proj', 'bias'), 'bk': ('k_proj', 'bias'),
    'bv': ('v_proj', 'bias'), 'bo': ('out_proj', 'bias'),
}


def marian_arrays(p, V):
    """Marian's tensors (numpy float32) from HF-named float32 tensors p."""
    out = {}

    def put(name, t):
        out[name] = np.ascontiguousarray(t.numpy().astype(np.float32))

    separate = 'model.encoder.embed_tokens.weight' in p
    if separate:
        put('encoder_Wemb', p['model.encoder.embed_tokens.weight'][:V - 1])
        put('decoder_Wemb', p['model.decoder.embed_tokens.weight'][:V - 1])
    else:
        put('Wemb', p['model.shared.weight'][:V - 1])
    put('decoder_ff_logit_out_b', p['final_logits_bias'][:, :V - 1])
    for side in ('encoder', 'decoder'):
        for i in range(ref.LAYERS):
            hf = f'model.{side}.layers.{i}'
            m = f'{side}_l{i + 1}_'
            blocks = [('self', 'self_attn', 'self_attn_layer_norm')]
            if side == 'decoder':
                blocks.append(('context', 'encoder_attn', 'encoder_attn_layer_norm'))
            for tag, attn, norm in blocks:
                for suffix, (proj, kind) in LAYER_BLOCKS.items():
                    t = p[f'{hf}.{attn}.{proj}.{kind}']
                    put(m + tag + '_' + suffix, t.T if kind == 'weight' else t[None, :])
                put(m + tag + '_Wo_ln_scale', p[f'{hf}.{norm}.weight'][None, :])
                put(m + tag + '_Wo_ln_bias', p[f'{hf}.{norm}.bias'][None, :])
            put(m + 'ffn_W1', p[f'{hf}.fc1.weight'].T)
            put(m + 'ffn_b1', p[f'{hf}.fc1.bias'][None, :])
            put(m + 'ffn_W2', p[f'{hf}.fc2.weight'].T)
            put(m + 'ffn_b2', p[f'{hf}.fc2.bias'][None, :])
            put(m + 'ffn_ffn_ln_scale', p[f'{hf}.final_layer_norm.weight'][None, :])
            put(m + 'ffn_ffn_ln_bias', p[f'{hf}.final_layer_norm.bias'][None, :])
    yml = MODEL_YML.format(d=ref.D_MODEL, v=V - 1, layers=ref.LAYERS, heads=ref.HEADS, ffn=ref.FFN,
                           tied_all='false' if separate else 'true')
    out['special:model.yml'] = np.frombuffer(yml.encode('utf-8') + b'\0', dtype=np.int8)
    return out


def greedy_two(src_ids, p_enc, p_dec, pos, pad):
    """marian_reference.greedy with the encoder's and the decoder's parameters apart (their token
    embeddings differ): start from pad, <pad> banned, stop after </s> or GREEDY_STEPS tokens."""
    src = torch.tensor([src_ids])
    mask = torch.ones_like(src)
    enc = ref.encoder(src, mask, p_enc, pos)
    out, margins = [pad], []
    for _ in range(ref.GREEDY_STEPS):
        logits = ref.decoder_logits(torch.tensor([out]), enc, mask, p_dec, pos)[0, -1]
        assert int(logits.argmax()) != pad, 'the unbanned argmax would be <pad>'
        logits[pad] = float('-inf')
        top2 = torch.topk(logits, 2).values
        margins.append(float(top2[0] - top2[1]))
        out.append(int(logits.argmax()))
        if out[-1] == ref.EOS:
            break
    return out, min(margins)


def reference_case(c, dec_in, p_enc, p_dec, pos, pad, **extra):
    """One case's float64 teacher-forced logits and greedy decode. A float32 forward lands within
    ~1e-6 of these logits (marian-tiny's max_abs_diff_float32_forward): a top-1/top-2 gap of 1e-3
    cannot flip there."""
    src = torch.tensor([c['input_ids']])
    mask = torch.ones_like(src)
    with torch.no_grad():
        enc = ref.encoder(src, mask, p_enc, pos)
        logits = ref.decoder_logits(torch.tensor([dec_in]), enc, mask, p_dec, pos)
        g_ids, g_margin = greedy_two(c['input_ids'], p_enc, p_dec, pos, pad)
    assert g_margin >= 1e-3, (c['source'], g_margin)
    return dict({'source': c['source'], 'input_ids': c['input_ids']}, **extra,
                decoder_input_ids=dec_in, logits=ref.rows(logits[0]),
                greedy={'output_ids': g_ids, 'stopped_at_eos': g_ids[-1] == ref.EOS,
                        'min_top2_margin': g_margin})


def write_reference(out, description, V, pad, cases):
    reference = {
        'description': description + '; float64 logits from the float32 weights by '
                                     'tests/reference/marian_reference.py\'s forward pass.',
        'generator': 'tests/reference/marian_npz_reference.py',
        'vocab_size': V, 'pad_token_id': pad, 'eos_token_id': ref.EOS, 'unk_token_id': ref.UNK,
        'greedy_max_new_tokens': ref.GREEDY_STEPS,
        'cases': cases,
    }
    with open(os.path.join(out, 'reference.json'), 'w', encoding='utf-8') as f:
        f.write(ref.to_json(reference) + '\n')


def write_marian_folder(tiny, out):
    os.makedirs(out, exist_ok=True)
    st, _ = ref.read_safetensors(os.path.join(tiny, 'model.safetensors'))
    with open(os.path.join(tiny, 'vocab.json'), encoding='utf-8') as f:
        vocab = json.load(f)
    V = len(vocab)
    pad = vocab['<pad>']
    assert pad == V - 1
    # The model HF's converter would build from the npz: <pad> row and bias entry zero.
    p = {k: v.clone() for k, v in st.items()}
    p['model.shared.weight'][pad] = 0.0
    p['final_logits_bias'][0, pad] = 0.0
    np.savez(os.path.join(out, 'model.npz'), **marian_arrays(p, V))
    # The archive as Marian (cnpy) writes it: every member stored, none compressed.
    with zipfile.ZipFile(os.path.join(out, 'model.npz')) as z:
        assert all(i.compress_type == zipfile.ZIP_STORED for i in z.infolist())
    write_vocab_yml(os.path.join(out, 'vocab.yml'), vocab)
    with open(os.path.join(out, 'decoder.yml'), 'w', encoding='utf-8') as f:
        f.write(DECODER_YML.format(src='vocab.yml', tgt='vocab.yml'))
    for name in ('source.spm', 'target.spm'):
        with open(os.path.join(tiny, name), 'rb') as a, open(os.path.join(out, name), 'wb') as b:
            b.write(a.read())

    # Reference outputs on marian-tiny's cases.
    with open(os.path.join(tiny, 'reference.json'), encoding='utf-8') as f:
        tiny_ref = json.load(f)
    q = {k: v.double() for k, v in p.items()}
    pos = ref.sinusoidal_table(ref.MAX_POS, ref.D_MODEL).double()
    cases = [reference_case(c, c['decoder_input_ids'], q, q, pos, pad) for c in tiny_ref['cases']]
    write_reference(out, 'Reference outputs of the Marian-native folder in this directory (marian-tiny '
                         'with a zero <pad> embedding and logit bias)', V, pad, cases)


def write_npz_fixtures(out):
    """arrays.npz (stored) and arrays-compressed.npz (deflated) hold the same arrays, one of each kind
    the reader takes; arrays.json gives their dtype, shape and values as numpy reads them.
    big-endian.npz holds one '>f4' array, which the reader refuses."""
    os.makedirs(out, exist_ok=True)
    arrays = {
        'f4_matrix': np.arange(6, dtype=np.float32).reshape(2, 3) / 4 - 0.5,
        'f8_vector': np.array([1.0 / 3, -2.5e-300, 7.0], dtype=np.float64),
        'f2_vector': np.array([0.5, -1.25, 65504.0], dtype=np.float16),
        'i1_text': np.frombuffer(b'dim-emb: 16\n\0', dtype=np.int8),
        'u1_bytes': np.array([0, 127, 255], dtype=np.uint8),
        'i8_scalar': np.array(-42, dtype=np.int64),
        'f4_fortran': np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3)),
        'f4_empty': np.zeros((0, 4), dtype=np.float32),
        'encoder_l1_self_Wq': np.full((1, 2, 2), 3.0, dtype=np.float32),
    }
    assert arrays['f4_fortran'].flags['F_CONTIGUOUS'] and not arrays['f4_fortran'].flags['C_CONTIGUOUS']
    np.savez(os.path.join(out, 'arrays.npz'), **arrays)
    np.savez_compressed(os.path.join(out, 'arrays-compressed.npz'), **arrays)
    with zipfile.ZipFile(os.path.join(out, 'arrays-compressed.npz')) as z:
        assert all(i.compress_type == zipfile.ZIP_DEFLATED for i in z.infolist())
    for name in ('arrays.npz', 'arrays-compressed.npz'):
        back = np.load(os.path.join(out, name))
        assert set(back.files) == set(arrays)
        for k, v in arrays.items():
            assert back[k].dtype == v.dtype and back[k].shape == v.shape and np.array_equal(back[k], v), k
    described = {k: {'dtype': v.dtype.str, 'shape': list(v.shape), 'values': v.ravel(order='C').tolist()}
                 for k, v in arrays.items()}
    with open(os.path.join(out, 'arrays.json'), 'w', encoding='utf-8') as f:
        json.dump(described, f, indent=1)
        f.write('\n')
    np.savez(os.path.join(out, 'big-endian.npz'), swapped=np.array([1.0, 2.0], dtype='>f4'))


SEPARATE_SEED = 31


def write_separate_folder(tiny, out):
    """marian-tiny with separate vocabularies: vocab.json (source) is marian-tiny's, target_vocab.json
    gives the same pieces other ids (a fixed shuffle of all but </s> 0, <unk> 1 and <pad>); the encoder
    keeps marian-tiny's embeddings, the decoder has its own (marian-tiny's row of each piece, scaled,
    plus noise), tied to the output as HF ties lm_head to the decoder's embed_tokens; the logit bias
    follows the target ids."""
    import random
    os.makedirs(out, exist_ok=True)
    st, _ = ref.read_safetensors(os.path.join(tiny, 'model.safetensors'))
    with open(os.path.join(tiny, 'vocab.json'), encoding='utf-8') as f:
        vocab = json.load(f)
    with open(os.path.join(tiny, 'config.json'), encoding='utf-8') as f:
        config = json.load(f)
    V, pad = len(vocab), vocab['<pad>']
    movable = list(range(2, V - 1))
    shuffled = movable[:]
    random.Random(SEPARATE_SEED).shuffle(shuffled)
    tgt_id = {0: 0, 1: 1, pad: pad}
    tgt_id.update(dict(zip(movable, shuffled)))          # source id -> target id of the same piece
    target_vocab = {piece: tgt_id[i] for piece, i in vocab.items()}
    order = [0] * V                                      # target id -> source id
    for s_id, t_id in tgt_id.items():
        order[t_id] = s_id
    shared = st['model.shared.weight']
    noise = ref.ParamMaker(SEPARATE_SEED).normal((V, ref.D_MODEL), 0.0, 0.1)
    dec_embed = shared[order] * 0.8 + noise
    bias = st['final_logits_bias'][:, order]
    tensors = {k: v for k, v in st.items() if k not in ('model.shared.weight', 'final_logits_bias')}
    tensors['model.encoder.embed_tokens.weight'] = shared
    tensors['model.decoder.embed_tokens.weight'] = dec_embed
    tensors['final_logits_bias'] = bias
    ref.write_safetensors(os.path.join(out, 'model.safetensors'), tensors, {'format': 'pt'})
    config['share_encoder_decoder_embeddings'] = False
    with open(os.path.join(out, 'config.json'), 'w', encoding='utf-8') as f:
        json.dump(config, f, indent=2)
        f.write('\n')
    for name, v in (('vocab.json', vocab), ('target_vocab.json', target_vocab)):
        with open(os.path.join(out, name), 'w', encoding='utf-8') as f:
            json.dump(v, f, ensure_ascii=False, indent=2)
            f.write('\n')
    with open(os.path.join(out, 'tokenizer_config.json'), 'w', encoding='utf-8') as f:
        json.dump({'source_lang': 'es', 'target_lang': 'en', 'separate_vocabs': True}, f, indent=2)
        f.write('\n')
    for name in ('source.spm', 'target.spm'):
        with open(os.path.join(tiny, name), 'rb') as a, open(os.path.join(out, name), 'wb') as b:
            b.write(a.read())

    with open(os.path.join(tiny, 'reference.json'), encoding='utf-8') as f:
        tiny_ref = json.load(f)
    pos = ref.sinusoidal_table(ref.MAX_POS, ref.D_MODEL).double()
    base = {k: v.double() for k, v in st.items()}
    p_enc = dict(base, **{'model.shared.weight': shared.double()})
    p_dec = dict(base, **{'model.shared.weight': dec_embed.double(), 'final_logits_bias': bias.double()})
    cases = []
    for c in tiny_ref['cases']:
        labels = [target_vocab.get(piece, ref.UNK) for piece in c['target_pieces']] + [ref.EOS]
        cases.append(reference_case(c, [pad] + labels[:-1], p_enc, p_dec, pos, pad,
                                    target=c['target'], target_pieces=c['target_pieces'],
                                    labels=labels))
    write_reference(out, 'Reference outputs of the separate-vocabulary MarianMT folder in this '
                         'directory (logits in target ids)', V, pad, cases)


def write_vocab_yml(path, vocab):
    with open(path, 'w', encoding='utf-8') as f:
        for piece, i in sorted(vocab.items(), key=lambda kv: kv[1]):
            if piece != '<pad>':
                f.write(f'{json.dumps(piece, ensure_ascii=False)}: {i}\n')


def write_marian_separate_folder(separate, out):
    """The separate-vocabulary model in Marian's layout: encoder_Wemb and decoder_Wemb (no <pad>
    rows), tiny.src.vocab.yml and tiny.trg.vocab.yml as OPUS-MT names them, tied-embeddings-src
    false. Its reference outputs are those of the model HF's converter makes of it (zero <pad> rows
    and logit bias)."""
    os.makedirs(out, exist_ok=True)
    st, _ = ref.read_safetensors(os.path.join(separate, 'model.safetensors'))
    vocabs = {}
    for name in ('vocab.json', 'target_vocab.json'):
        with open(os.path.join(separate, name), encoding='utf-8') as f:
            vocabs[name] = json.load(f)
    V = len(vocabs['vocab.json'])
    pad = vocabs['vocab.json']['<pad>']
    p = {k: v.clone() for k, v in st.items()}
    p['model.encoder.embed_tokens.weight'][pad] = 0.0
    p['model.decoder.embed_tokens.weight'][pad] = 0.0
    p['final_logits_bias'][0, pad] = 0.0
    np.savez(os.path.join(out, 'model.npz'), **marian_arrays(p, V))
    write_vocab_yml(os.path.join(out, 'tiny.src.vocab.yml'), vocabs['vocab.json'])
    write_vocab_yml(os.path.join(out, 'tiny.trg.vocab.yml'), vocabs['target_vocab.json'])
    with open(os.path.join(out, 'decoder.yml'), 'w', encoding='utf-8') as f:
        f.write(DECODER_YML.format(src='tiny.src.vocab.yml', tgt='tiny.trg.vocab.yml'))
    for name in ('source.spm', 'target.spm'):
        with open(os.path.join(separate, name), 'rb') as a, open(os.path.join(out, name), 'wb') as b:
            b.write(a.read())
    with open(os.path.join(separate, 'reference.json'), encoding='utf-8') as f:
        sep_ref = json.load(f)
    pos = ref.sinusoidal_table(ref.MAX_POS, ref.D_MODEL).double()
    base = {k: v.double() for k, v in p.items()}
    p_enc = dict(base, **{'model.shared.weight': base['model.encoder.embed_tokens.weight']})
    p_dec = dict(base, **{'model.shared.weight': base['model.decoder.embed_tokens.weight']})
    cases = [reference_case(c, c['decoder_input_ids'], p_enc, p_dec, pos, pad, labels=c['labels'])
             for c in sep_ref['cases']]
    write_reference(out, 'Reference outputs of the separate-vocabulary model in Marian\'s layout in '
                         'this directory (zero <pad> rows and logit bias, as HF converts it; logits '
                         'in target ids)', V, pad, cases)


def main():
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    torch.set_num_threads(1)
    write_marian_folder(sys.argv[1], sys.argv[2])
    write_npz_fixtures(sys.argv[3])
    write_separate_folder(sys.argv[1], sys.argv[4])
    write_marian_separate_folder(sys.argv[4], sys.argv[5])


if __name__ == '__main__':
    main()
