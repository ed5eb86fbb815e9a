"""Tests of the installed Python package (tests/python/run.sh sets the paths): the text
`goose generate` prints, keyword options, streaming, errors, the drafter driven by a host loop
in Python, and the structures against the library."""
import json
import os
import shutil
import subprocess
import tempfile
import unittest

import goose

MODEL = os.environ["GOOSE_TEST_MODEL"]
BINARY = os.environ["GOOSE_BINARY"]
PROMPT = "Once upon a time"


CACHE = tempfile.mkdtemp(prefix="goose_py_cache_")  # the binary's caches, never the user's


def goose_generate(*args):
    out = subprocess.run([BINARY, "generate", "-m", MODEL, "-t", "1", "--no-table-cache", *args],
                         check=True, capture_output=True, text=True,
                         env=dict(os.environ, XDG_CACHE_HOME=CACHE))
    return out.stdout


def host_loop(model, session, drafter, prompt, n_predict, budget):
    """A host engine's greedy loop around the drafter: (tokens, passes)."""
    k = drafter.top_k
    request = drafter.begin(prompt)
    n = len(prompt)
    session.truncate(0)
    session.score(prompt, [i - 1 for i in range(n)])
    rows = [session.top_k(r, k) for r in range(n)]
    request.observe_prompt(0, [r[0] for r in rows], [r[1] for r in rows])
    token = session.argmax(n - 1)
    session.keep(list(range(n)))
    request.commit([], token)
    tokens, passes = [token], 0
    while not model.is_eog(tokens[-1]) and len(tokens) < n_predict:
        tree = request.propose(budget)
        session.score(tree.tokens, tree.parents)
        rows = [session.top_k(r, k) for r in range(len(tree.tokens))]
        request.observe([r[0] for r in rows], [r[1] for r in rows])
        path, v = [], 0
        while True:
            t = session.argmax(v)
            child = next((u for u in range(v + 1, len(tree.tokens))
                          if tree.parents[u] == v and tree.tokens[u] == t), None)
            if child is None:
                bonus = t
                break
            path.append(child)
            v = child
            if model.is_eog(t):
                bonus = -1
                break
        session.keep([0] + path)
        request.commit(path, bonus)
        passes += 1
        committed = [tree.tokens[u] for u in path] + ([bonus] if bonus >= 0 else [])
        tokens += committed[:n_predict - len(tokens)]
        if bonus < 0:
            break
    request.end()
    return tokens, passes


class GenerateTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.model = goose.Model(MODEL, n_threads=1)

    def test_text_is_what_goose_generate_prints(self):
        text = self.model.generate(PROMPT, max_tokens=24)
        printed = goose_generate("-p", PROMPT, "-n", "24", "--spec", "none")
        self.assertEqual(printed, PROMPT + text + "\n")
        j = json.loads(goose_generate("-p", PROMPT, "-n", "24", "--spec", "none", "--json"))
        self.assertEqual(text, j["text"])
        self.assertGreater(len(text), 20)

    def test_keyword_options(self):
        plain = self.model.generate(PROMPT, max_tokens=40)
        self.assertEqual(self.model.generate(PROMPT, max_tokens=40, method="goose", budget=16),
                         plain)
        self.assertEqual(self.model.generate(PROMPT, max_tokens=40, method="pld"), plain)
        sampled = self.model.generate(PROMPT, max_tokens=40, temperature=0.8, top_k=20,
                                      top_p=0.9, seed=5, method="goose", budget=8)
        j = json.loads(goose_generate("-p", PROMPT, "-n", "40", "--temp", "0.8", "--top-k", "20",
                                      "--top-p", "0.9", "--seed", "5", "--spec", "none", "--json"))
        self.assertEqual(sampled, j["text"])
        self.assertNotEqual(sampled, plain)
        # A predicted output (OpenAI's Predicted Outputs) only speeds it up.
        predicted = self.model.generate(PROMPT, max_tokens=40, method="goose", budget=32,
                                        prediction=plain.replace("little", "big"))
        self.assertEqual(predicted, plain)

    def test_stream_yields_pieces_as_they_commit(self):
        pieces = list(self.model.generate(PROMPT, max_tokens=30, stream=True))
        self.assertGreater(len(pieces), 5)
        self.assertEqual("".join(pieces), self.model.generate(PROMPT, max_tokens=30))
        # Leaving early stops the generation; the model goes on working.
        stream = self.model.generate(PROMPT, max_tokens=500, ignore_eos=True, stream=True)
        first = next(stream)
        stream.close()
        self.assertTrue(first)
        self.assertEqual(len(self.model.tokenize(self.model.generate(PROMPT, max_tokens=5),
                                                 add_bos=False)) > 0, True)

    def test_tokenize(self):
        ids = self.model.tokenize(PROMPT)
        self.assertEqual(ids[0], self.model.bos)
        self.assertEqual(self.model.detokenize(ids[1:]), " " + PROMPT)

    def test_errors(self):
        with self.assertRaises(goose.GooseError) as e:
            goose.Model("/nonexistent/model.gguf")
        self.assertEqual(e.exception.status, "GOOSE_ERROR_FILE")
        self.assertIn("/nonexistent/model.gguf", str(e.exception))
        with self.assertRaises(goose.GooseError) as e:
            self.model.generate(PROMPT, method="bogus")
        self.assertEqual(e.exception.status, "GOOSE_ERROR_INVALID_ARGUMENT")
        self.assertIn("unknown method", str(e.exception))
        with self.assertRaises(goose.GooseError):
            self.model.generate(PROMPT, budget="auto", method="goose")  # no cost curve
        with self.assertRaises(goose.GooseError):
            goose.Drafter(0)


class DrafterTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.model = goose.Model(MODEL, n_threads=1)

    def test_host_loop_is_lossless_and_matches_goose_generate(self):
        text = "Tom had a red ball. Tom had a red ball. Tom had a red ball. Tom had a"
        prompt = self.model.tokenize(text)
        drafter = goose.Drafter(self.model.n_vocab, "goose", self.model.fingerprint)
        self.assertEqual((drafter.method, drafter.top_k), ("goose+keep", 10))
        with self.model.session() as session:
            tokens, passes = host_loop(self.model, session, drafter, prompt, 64, 16)
            plain = session.generate_tokens(prompt, 64)
        self.assertEqual(tokens, plain)
        j = json.loads(goose_generate("-p", text, "-n", "64", "--spec", "goose", "--budget", "16",
                                      "--json"))
        self.assertEqual(tokens, j["tokens"])
        self.assertEqual(passes, j["stats"]["forward_passes"])
        stats = drafter.stats()
        self.assertEqual(stats["cycles"], passes)
        self.assertGreater(stats["sources"]["spine"]["accepted"], 0)
        drafter.close()

    def test_save_load_and_trees(self):
        drafter = goose.Drafter(self.model.n_vocab)
        prompt = self.model.tokenize(PROMPT)
        with self.model.session() as session:
            host_loop(self.model, session, drafter, prompt, 32, 12)
        directory = tempfile.mkdtemp(prefix="goose_py_")
        try:
            drafter.save(directory)
            again = goose.Drafter(self.model.n_vocab)
            again.load(directory)
            trees = []
            for d in (drafter, again):
                with d.begin([1, 2, 3]) as request:
                    request.commit([], prompt[1])
                    trees.append(request.propose(16))
            self.assertEqual(trees[0], trees[1])
            self.assertGreater(len(trees[0].tokens), 1)
            self.assertEqual(trees[0].source[0], "root")
            with self.assertRaises(goose.GooseError) as e:
                goose.Drafter(self.model.n_vocab, model_fingerprint=5).load(directory)
            self.assertEqual(e.exception.status, "GOOSE_ERROR_FILE")
        finally:
            shutil.rmtree(directory)

    def test_ancestor_mask(self):
        self.assertEqual(goose.ancestor_mask([-1, 0, 0, 1]),
                         [[1, 0, 0, 0], [1, 1, 0, 0], [1, 0, 1, 0], [1, 1, 0, 1]])
        with self.assertRaises(goose.GooseError):
            goose.ancestor_mask([-1, 3])


if __name__ == "__main__":
    print("goose", goose.version(), "from", goose.__file__)
    try:
        unittest.main()
    finally:
        shutil.rmtree(CACHE, ignore_errors=True)
