"""The downstream task families' metrics, one module per family; every score is a fraction in
[0, 1] (or a correlation in [-1, 1]), never a percentage, like ``baselines.accuracy``.

- ``tagging``: sequence labelling (NER-style BIO tags): entity-level micro precision, recall and
  F1 as seqeval computes them (conlleval-compatible), per entity type too, and token accuracy;
  ``to_iob2`` rewrites IOB1 tags as IOB2;
- ``spans``: extractive question answering, SQuAD v1.1's rule: exact match and bag-of-tokens F1
  of normalised answers, the best over each question's gold answers;
- ``regression``: Pearson and Spearman correlations (SciPy) and the mean squared error;
- ``generation``: text generation against one reference each: ROUGE-1/2/L F-measure
  (``rouge-score``), corpus BLEU and chrF (sacrebleu) and normalised exact match.

Nothing is imported here: each module imports its library (seqeval, SciPy, rouge-score,
sacrebleu) inside the functions that use it, so importing a module stays cheap.
"""
