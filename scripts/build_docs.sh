#!/usr/bin/env bash
# The documentation site, built strictly (mkdocs.yml: every warning fails the build) into site/
# (git-ignored, cleaned first). Needs the docs extra: pip install -c constraints.txt -e ".[docs]",
# and a demo run for the demo's tables: `moram-avalanche demo` writes runs/demo (or set
# MORAM_AVALANCHE_DOCS_DEMO to a demo's --out folder). CI runs it after the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"  # the checkout's package, as mkdocstrings reads it
export NO_MKDOCS_2_WARNING=1                         # Material's notice about its successor, on every build
demo="${MORAM_AVALANCHE_DOCS_DEMO:-runs/demo}"
echo "docs: strict build of mkdocs.yml into site/; it checks:"
echo "  - every page of the nav exists, every link and anchor resolves (validation), every snippet path exists"
echo "  - the API reference: every name of every public module's __all__ rendered on a page of docs/api/"
echo "    with a docstring (docs/hooks/api_coverage.py); no griffe warning (mkdocstrings)"
echo "  - the command-line reference generated from moram_avalanche.cli.build_parser() (docs/hooks/cli_reference.py)"
echo "  - the demo's tables read from $demo (docs/hooks/demo_tables.py)"
start=$SECONDS
python -m mkdocs build --strict --clean --site-dir site
echo "docs: site/ built strictly in $((SECONDS - start)) s"
