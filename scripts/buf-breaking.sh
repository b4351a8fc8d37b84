#!/usr/bin/env bash
# make breaking: `buf breaking` (rules in buf.yaml) of proto/ against a base
# that means something:
#   - BUF_BREAKING_AGAINST, when set (any buf input, e.g. '.git#branch=main');
#   - on a branch other than main: the merge-base with main (or origin/main),
#     i.e. what this branch changes;
#   - on main (CI checks out main), or on a commit main already contains:
#     the previous commit, HEAD~1.
# It needs the base commit in the clone: on a shallow clone without it, it
# says so loudly on stderr and exits 0 WITHOUT checking (set
# BUF_BREAKING_REQUIRED=1 to make that a failure).
set -euo pipefail
cd "$(dirname "$0")/.."
BUF=${BUF:-go run github.com/bufbuild/buf/cmd/buf@v1.75.0}

skip() {
  {
    echo "!! ============================================================"
    echo "!! buf breaking NOT RUN: $*"
    echo "!! ============================================================"
  } >&2
  [ "${BUF_BREAKING_REQUIRED:-0}" = 1 ] && exit 1
  exit 0
}

if [ -n "${BUF_BREAKING_AGAINST:-}" ]; then
  echo ">> buf breaking against $BUF_BREAKING_AGAINST"
  exec $BUF breaking --against "$BUF_BREAKING_AGAINST"
fi

git rev-parse --git-dir >/dev/null 2>&1 || skip "not a git checkout"
shallow=$(git rev-parse --is-shallow-repository)
branch=$(git rev-parse --abbrev-ref HEAD)
main=""
for m in main origin/main; do
  if git rev-parse -q --verify "$m^{commit}" >/dev/null; then main=$m; break; fi
done

base="" what=""
if [ "$branch" != main ] && [ -n "$main" ]; then
  base=$(git merge-base HEAD "$main" 2>/dev/null) || true
  what="the merge-base with $main"
fi
if [ -z "$what" ] || [ "$base" = "$(git rev-parse HEAD)" ]; then
  # On main, or on a commit main already contains (a detached CI checkout).
  base=$(git rev-parse -q --verify 'HEAD~1^{commit}' 2>/dev/null) || true
  what="the previous commit (HEAD~1)"
fi
if [ -z "$base" ]; then
  [ "$shallow" = true ] && skip "shallow clone: $what is not in it (git fetch --unshallow)"
  skip "no base commit: $what does not exist"
fi

# buf reads the repository itself (a worktree's .git is a file: use the
# common git directory).
gitdir=$(cd "$(git rev-parse --git-common-dir)" && pwd)
echo ">> buf breaking against $what, $(git log -1 --format='%h %s' "$base" | cut -c1-72)"
exec $BUF breaking --against "$gitdir#format=git,ref=$base"
