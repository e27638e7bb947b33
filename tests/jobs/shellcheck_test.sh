#!/usr/bin/env bash
# Lint test (shellcheck_test.sh): every shell script in jobs/, scripts/, tests/jobs/ and tests/cluster/
# passes ShellCheck at all severities (following sourced files), and the Python tools there
# parse. Fails when ShellCheck is missing (scripts/install-deps.sh installs it) rather than
# passing unchecked.
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo" || exit 1
command -v shellcheck >/dev/null || { echo "FAIL: shellcheck is not installed (apt-get install shellcheck; scripts/install-deps.sh does)"; exit 1; }
mapfile -t files < <(find jobs scripts tests/jobs tests/cluster -type f \( -name '*.sh' -o -name '*.sbatch' -o -name '*.pbs' \) | sort)
[ ${#files[@]} -ge 10 ] || { echo "FAIL: found only ${#files[@]} scripts: ${files[*]}"; exit 1; }
rc=0
shellcheck -x --severity=style "${files[@]}" || rc=1
mapfile -t py < <(find jobs scripts tests/jobs tests/cluster -type f -name '*.py' | sort)
for f in "${py[@]}"; do
    /usr/bin/python3 -c 'import ast, sys; ast.parse(open(sys.argv[1]).read(), sys.argv[1])' "$f" || { echo "FAIL: $f does not parse"; rc=1; }
done
[ $rc = 0 ] && echo "shellcheck clean: ${#files[@]} scripts; ${#py[@]} Python files parse"
exit $rc
