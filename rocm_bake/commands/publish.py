"""``rocm-bake publish``: one arch's index to a GitHub release + gh-pages (a separate decision from building)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from rocm_bake.archset import ArchSet
from rocm_bake.cli import arch_argument
from rocm_bake.http_waits import positive_seconds
from rocm_bake.index import DEFAULT_ROCM_VERSION


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "publish", help="publish DIST/index/<arch>/: wheels to a per-arch release, index HTML to gh-pages",
        description="Publish what 'rocm-bake index build' wrote (it never fetches again). "
                    "The token comes from GITHUB_TOKEN and is never printed.",
    )
    parser.add_argument("--arch", required=True, type=arch_argument(ArchSet),
                        help="the index's architecture, e.g. gfx950, or a fat build's 'gfx950;gfx1201'")
    parser.add_argument("--dist", required=True, type=Path, help="DIST holding index/<arch>/")
    parser.add_argument("--repo", default=None,
                        help="OWNER/NAME of the GitHub repository (default: this checkout's origin remote when it "
                             "is on GitHub; there is no other default)")
    parser.add_argument("--rocm-version", default=DEFAULT_ROCM_VERSION,
                        help=f"ROCm version in the release tag wheels-<arch>-rocm<v> (default {DEFAULT_ROCM_VERSION})")
    # Defaults are GitHubEndpoints' own (github.com's), applied in run(): the GitHub client is not imported for --help.
    parser.add_argument("--api-url", default=None, help="REST API base (default https://api.github.com)")
    parser.add_argument("--uploads-url", default=None,
                        help="release asset upload host (default https://uploads.github.com)")
    parser.add_argument("--web-url", default=None,
                        help="release download host the index hrefs point at (default https://github.com)")
    parser.add_argument("--pages-url", default=None,
                        help="GitHub Pages base, {owner}/{repo} filled in (default https://{owner}.github.io/{repo})")
    parser.add_argument("--timeout", type=positive_seconds, default=60.0, metavar="SECONDS",
                        help="a GitHub call that sends nothing for this long (API calls: at most 20 s) is tried "
                             "once more, then publishing stops (default 60)")
    parser.add_argument("--quiet", action="store_true", help="no progress or retry lines on stderr")
    parser.add_argument("--dry-run", action="store_true", help="print the plan; change nothing")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rocm_bake import progress
    from rocm_bake.errors import RocmBakeError
    from rocm_bake.publish.github import github_endpoints
    from rocm_bake.publish.origin import FROM_ORIGIN, origin_github_repo
    from rocm_bake.publish.publisher import publish

    repo = args.repo or origin_github_repo()
    if repo is None:
        raise RocmBakeError("--repo: required: this checkout's origin remote is not on GitHub, and there is no "
                            "default target (give --repo OWNER/NAME, or GITHUB_REPO=OWNER/NAME to make)")
    if not args.repo and not (args.json or args.quiet):
        print(f"repository: {repo}, {FROM_ORIGIN.replace('rocm-bake:githubRepo', '--repo')}")

    endpoints = github_endpoints(api_url=args.api_url, uploads_url=args.uploads_url, web_url=args.web_url,
                                 pages_url=args.pages_url)
    before = progress.is_quiet()  # restored after: tests call main() many times in one process
    progress.set_quiet(before or args.quiet or args.json)
    try:
        result = publish(args.arch, args.dist, repo, os.environ.get("GITHUB_TOKEN") or None,
                         rocm_version=args.rocm_version, endpoints=endpoints, dry_run=args.dry_run,
                         timeout=args.timeout,
                         repo_source="--repo" if args.repo else "the origin remote's URL (or give --repo)")
    finally:
        progress.set_quiet(before)
    if args.json:
        print(result.model_dump_json(indent=2))
        return 0
    print(("dry run: nothing changed\n" if result.dry_run else "") + result.plan.text())
    if not result.dry_run:
        commit = result.pages_commit or "none (unchanged)"
        print(f"done: {result.uploads} uploaded, {result.deletes} deleted, gh-pages commit {commit}")
        print("install:")
        print("\n".join(published_lines(args.dist, args.arch, endpoints.pages_base(repo))))
    return 0


def published_lines(dist: Path, arch: ArchSet, pages_base: str) -> list[str]:
    """The published index's install lines (version and lock as the local index, just published, has them)."""
    from rocm_bake.index.models import index_dir
    from rocm_bake.install_line import lines_for, local_index_facts, with_hint
    from rocm_bake.publish.origin import PAGES_WHEELS

    version, locked = local_index_facts(index_dir(dist, arch))
    lines = lines_for(f"{pages_base.rstrip('/')}/{PAGES_WHEELS}", arch.dir_name, version, locked)
    return [f"  {line}" for line in with_hint(lines)]
