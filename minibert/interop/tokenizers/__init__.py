"""The tokenizer layouts of released checkpoints, read from scratch (and ours written as one).

    albert.py           ALBERT's spiece.model (SentencePiece), with its do_lower_case and specials
    byte_bpe.py         RoBERTa's byte-level BPE: vocab.json + merges.txt
    json_import.py      any tokenizer.json of the family (JsonTokenizer): json_components.py its
                        steps on text, json_models.py its models (WordPiece, Unigram, BPE),
                        charsmap.py SentencePiece's character map, unigram.py the Viterbi search
    json_export.py      our SentencePiece model as a Hugging Face tokenizer.json

`minibert.tokenizers.load_tokenizer` is the one loader, and the order in which it looks for
each layout in a folder.
"""
