"""Package data: ``corpus.txt``, a small plain-English text corpus (original prose) that
``ckir train`` uses when no ``--data`` file is given (:func:`ckir.resources.corpus_path`)."""
