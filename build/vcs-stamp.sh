#!/usr/bin/env bash
# Prints the -ldflags that stamp the git revision into parley where Go cannot: Go writes
# vcs.revision/vcs.time/vcs.modified into the build info itself in a git clone, but not in a
# git worktree (whose .git is a file) nor under GOFLAGS=-buildvcs=false. app/cli.vcsStamp is
# "REVISION TIME MODIFIED"; the build info wins where it has them. Prints nothing outside git.
set -euo pipefail
cd "$(dirname "$0")/.."
git rev-parse --git-dir >/dev/null 2>&1 || exit 0
dirty=false
[[ -z $(git status --porcelain 2>/dev/null) ]] || dirty=true
printf "%s" "-X 'github.com/parley-voice/parley/app/cli.vcsStamp=$(git rev-parse HEAD) $(TZ=UTC git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ) $dirty'"
