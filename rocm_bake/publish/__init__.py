"""Publishing one index: wheels to a per-arch GitHub release, its pages to gh-pages.

One module per concern; callers import from the module itself:

* ``naming``: the release tag, gh-pages folder and release text of an arch set.
* ``local``: ``DIST/index/<dir_name>/`` read and checked against GitHub's limits.
* ``hashing``: asset sha256s (cached) and git blob ids.
* ``plan``: what would change on GitHub (read only).
* ``apply``: verified uploads, the release, one gh-pages commit.
* ``publisher``: ``Publisher`` and ``publish()``, the order that makes a rerun safe.
* ``github``: the REST client; ``landing``: the site's landing page; ``origin``: the default repository.
"""
