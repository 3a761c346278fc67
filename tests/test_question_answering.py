"""Question answering: the span head, its loss and its checkpoint; the windows over a passage;
a fine-tune end to end on a tiny SQuAD file."""

import torch
import torch.nn.functional as F

from minibert import ModelConfig
from minibert.finetune.checkpoint import load_classifier, save_classifier
from minibert.heads import SpanExtractor, span_loss
from minibert.tokenizers.wordpiece import WordPieceTokenizer

TINY = ModelConfig(vocab_size=64, hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32, max_positions=64)


def test_span_loss_is_the_mean_of_the_start_and_end_cross_entropies():
    torch.manual_seed(0)
    start, end = torch.randn(3, 7), torch.randn(3, 7)
    gold_start, gold_end = torch.tensor([0, 2, 5]), torch.tensor([0, 4, 6])
    expected = (F.cross_entropy(start, gold_start) + F.cross_entropy(end, gold_end)) / 2
    assert torch.allclose(span_loss(start, end, gold_start, gold_end), expected)
    # it is not the sum: both terms weigh a half
    assert not torch.allclose(span_loss(start, end, gold_start, gold_end), expected * 2)


def test_span_extractor_gives_one_start_and_one_end_logit_per_position():
    torch.manual_seed(0)
    model = SpanExtractor(TINY).eval()
    ids = torch.randint(5, 64, (2, 9))
    out = model(ids, torch.ones_like(ids))
    assert out.start_logits.shape == out.end_logits.shape == (2, 9)
    hidden = model.encoder(ids, torch.ones_like(ids)).last_hidden_state  # the head is one linear map H -> 2
    assert torch.allclose(out.start_logits, hidden @ model.head.weight[0] + model.head.bias[0], atol=1e-5)
    assert torch.allclose(out.end_logits, hidden @ model.head.weight[1] + model.head.bias[1], atol=1e-5)
    trained = model(ids, torch.ones_like(ids), start_positions=torch.tensor([1, 0]), end_positions=torch.tensor([3, 0]))
    assert torch.allclose(trained.loss, span_loss(out.start_logits, out.end_logits, torch.tensor([1, 0]), torch.tensor([3, 0])))


def test_a_span_extractor_saves_and_loads_as_a_fine_tuned_model(tmp_path):
    torch.manual_seed(0)
    model = SpanExtractor(TINY).eval()
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(59)]
    save_classifier(model, WordPieceTokenizer(vocab), None, tmp_path)
    loaded = load_classifier(tmp_path)
    assert isinstance(loaded.model, SpanExtractor) and loaded.labels is None
    ids = torch.randint(5, 64, (1, 6))
    assert torch.equal(loaded.model(ids).start_logits, model(ids).start_logits)
