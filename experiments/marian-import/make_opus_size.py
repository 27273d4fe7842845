#!/usr/bin/python3
"""A random-weight MarianMT folder at OPUS-MT's size (d_model 512, 6 + 6 layers, 8 heads, FFN
2048, swish, shared embeddings, final_logits_bias), in the layout of
Helsinki-NLP/opus-mt-*: config.json, pytorch_model.bin (torch.save of the state dict as HF's
save_pretrained(safe_serialization=False) writes it), source.spm, target.spm (SentencePiece
unigram models trained on the Bible corpus's training files) and the joint vocab.json
(MarianTokenizer's: "</s>" 0, "<unk>" 1, the source pieces, then the target pieces not already
there, "<pad>" last).

No pretrained OPUS-MT weights can be fetched on the machines this project runs on; this folder has
the size and layout of one (and so the cost of pruning, exporting and decoding it), not its
translations. Deterministic: the same bytes from the same inputs.

    /usr/bin/python3 experiments/marian-import/make_opus_size.py data/bible OUT [PIECES]
(Debian 12's python3-torch and python3-sentencepiece; PIECES per side, default 8000.)
"""
import io
import json
import math
import sys

import sentencepiece as spm
import torch

D, LAYERS, HEADS, FFN, MAX_POS = 512, 6, 8, 2048, 512


def train_spm(path, pieces, out):
    model = io.BytesIO()
    with open(path, encoding='utf-8') as f:
        lines = [l.rstrip('\n') for l in f]
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=model,
                                   vocab_size=pieces, model_type='unigram',
                                   character_coverage=1.0, num_threads=1,
                                   normalization_rule_name='identity', minloglevel=2)
    with open(out, 'wb') as f:
        f.write(model.getvalue())
    return spm.SentencePieceProcessor(model_proto=model.getvalue())


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    data, out = sys.argv[1], sys.argv[2]
    pieces = int(sys.argv[3]) if len(sys.argv) == 4 else 8000
    import os
    os.makedirs(out, exist_ok=True)
    src = train_spm(f'{data}/train.es', pieces, f'{out}/source.spm')
    tgt = train_spm(f'{data}/train.en', pieces, f'{out}/target.spm')
    vocab = {'</s>': 0, '<unk>': 1}
    for sp in (src, tgt):
        for i in range(sp.get_piece_size()):
            p = sp.id_to_piece(i)
            if sp.is_control(i) or sp.is_unknown(i) or p in vocab:
                continue
            vocab[p] = len(vocab)
    vocab['<pad>'] = len(vocab)
    V = len(vocab)
    with open(f'{out}/vocab.json', 'w', encoding='utf-8') as f:
        json.dump(vocab, f, ensure_ascii=False, indent=2)

    g = torch.Generator().manual_seed(2026)
    sd = {}

    def linear(name, n_in, n_out):
        bound = math.sqrt(3.0 / n_in)
        sd[name + '.weight'] = (torch.rand(n_out, n_in, generator=g) * 2 - 1) * bound
        sd[name + '.bias'] = torch.randn(n_out, generator=g) * 0.02

    def norm(name):
        sd[name + '.weight'] = 1 + torch.randn(D, generator=g) * 0.02
        sd[name + '.bias'] = torch.randn(D, generator=g) * 0.02

    def attention(name):
        for p in ('k_proj', 'v_proj', 'q_proj', 'out_proj'):
            linear(f'{name}.{p}', D, D)

    shared = torch.randn(V, D, generator=g) * D ** -0.5
    shared[V - 1] = 0  # the pad row, as converted OPUS-MT models have it
    sd['model.shared.weight'] = shared
    for i in range(LAYERS):
        e = f'model.encoder.layers.{i}'
        attention(e + '.self_attn')
        norm(e + '.self_attn_layer_norm')
        linear(e + '.fc1', D, FFN)
        linear(e + '.fc2', FFN, D)
        norm(e + '.final_layer_norm')
    for i in range(LAYERS):
        d = f'model.decoder.layers.{i}'
        attention(d + '.self_attn')
        norm(d + '.self_attn_layer_norm')
        attention(d + '.encoder_attn')
        norm(d + '.encoder_attn_layer_norm')
        linear(d + '.fc1', D, FFN)
        linear(d + '.fc2', FFN, D)
        norm(d + '.final_layer_norm')
    sd['final_logits_bias'] = torch.zeros(1, V)
    # save_pretrained(safe_serialization=False): the tied aliases share the shared storage.
    for alias in ('model.encoder.embed_tokens.weight', 'model.decoder.embed_tokens.weight',
                  'lm_head.weight'):
        sd[alias] = sd['model.shared.weight']
    torch.save(sd, f'{out}/pytorch_model.bin')
    config = {
        'activation_dropout': 0.0, 'activation_function': 'swish', 'add_bias_logits': False,
        'add_final_layer_norm': False, 'architectures': ['MarianMTModel'],
        'attention_dropout': 0.0, 'bad_words_ids': [[V - 1]], 'bos_token_id': 0,
        'classif_dropout': 0.0, 'classifier_dropout': 0.0, 'd_model': D,
        'decoder_attention_heads': HEADS, 'decoder_ffn_dim': FFN, 'decoder_layerdrop': 0.0,
        'decoder_layers': LAYERS, 'decoder_start_token_id': V - 1, 'decoder_vocab_size': V,
        'dropout': 0.1, 'encoder_attention_heads': HEADS, 'encoder_ffn_dim': FFN,
        'encoder_layerdrop': 0.0, 'encoder_layers': LAYERS, 'eos_token_id': 0,
        'forced_eos_token_id': 0, 'init_std': 0.02, 'is_encoder_decoder': True,
        'max_length': 512, 'max_position_embeddings': MAX_POS, 'model_type': 'marian',
        'normalize_before': False, 'normalize_embedding': False, 'num_beams': 4,
        'num_hidden_layers': LAYERS, 'pad_token_id': V - 1, 'scale_embedding': True,
        'share_encoder_decoder_embeddings': True, 'static_position_embeddings': True,
        'torch_dtype': 'float32', 'use_cache': True, 'vocab_size': V}
    with open(f'{out}/config.json', 'w') as f:
        json.dump(config, f, indent=2, sort_keys=True)
    with open(f'{out}/tokenizer_config.json', 'w') as f:
        json.dump({'source_lang': 'es', 'target_lang': 'en', 'separate_vocabs': False}, f)
    n = sum(t.numel() for k, t in sd.items() if k not in (
        'model.encoder.embed_tokens.weight', 'model.decoder.embed_tokens.weight', 'lm_head.weight'))
    print(f'{out}: vocab {V}, {n} parameters')


if __name__ == '__main__':
    main()
