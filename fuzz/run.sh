#!/usr/bin/env bash
# Seeds the corpora and runs every fuzz target (or those named) for N inputs,
# one target at a time, in one process at low priority.
#
#   fuzz/run.sh [N] [TARGET...]        N defaults to 200000
#
# Needs cargo-fuzz (cargo install cargo-fuzz). Only a stable toolchain is
# assumed: RUSTC_BOOTSTRAP=1 lets it take cargo-fuzz's -Z flags, and with no
# sanitizer (-s none) none of nightly's sanitizer runtimes is needed; debug
# assertions (-a) keep integer overflow a crash. C code (SQLite) is not
# instrumented: coverage is the Rust side's.
#
# Seeds come from sample-sessions/, tests/fixtures/, fuzz/seeds/ and, where
# the folder exists, the small files of ../shared/data; they are copied into
# fuzz/corpus/ (untracked), never into the repository. A crash stops its
# target (the others still run); its input lands in fuzz/artifacts/TARGET/.
# Each target's libFuzzer output is kept in fuzz/artifacts/logs/TARGET.log.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
shared=$root/../shared/data
runs=${1:-200000}
shift || true
all=(log_file log_rows import_claude_code import_codex import_opencode import_llm
    import_api import_otel policy_toml policy_set)
if [ $# -gt 0 ]; then targets=("$@"); else targets=("${all[@]}"); fi

export RUSTC_BOOTSTRAP=1
# Each input's files go to a fresh temporary folder: in memory where possible.
if [ -z "${TMPDIR:-}" ] && [ -d /dev/shm ] && [ -w /dev/shm ]; then
    export TMPDIR=/dev/shm
fi
cd "$here"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The largest input each target is given; larger seeds are left out.
max_len() {
    case $1 in
        log_file) echo 131072 ;;
        policy_*) echo 16384 ;;
        *) echo 65536 ;;
    esac
}

# seed TARGET FILE NAME: FILE into TARGET's corpus, unless it is too large.
seed() {
    local size
    size=$(wc -c <"$2")
    if [ "$size" -gt 0 ] && [ "$size" -le "$(max_len "$1")" ]; then
        mkdir -p "corpus/$1"
        cp "$2" "corpus/$1/seed-$3"
    fi
}

have_sqlite=0
command -v sqlite3 >/dev/null && have_sqlite=1

# rows_of DB TABLE...: the tables' rows as a rows text (see src/fuzzing.rs),
# at most 40 rows a table and 200 characters a field.
rows_of() {
    local db=$1 table cols col expr
    shift
    for table in "$@"; do
        cols=$(sqlite3 -readonly "$db" "SELECT name FROM pragma_table_info('$table')")
        expr=""
        for col in $cols; do
            expr="$expr || char(9) || CASE typeof(\"$col\")
                WHEN 'null' THEN 'N'
                WHEN 'integer' THEN 'I' || \"$col\"
                WHEN 'real' THEN 'R' || \"$col\"
                WHEN 'blob' THEN 'X' || hex(substr(\"$col\", 1, 200))
                ELSE 'T' || replace(replace(replace(replace(substr(\"$col\", 1, 200),
                    '\\', '\\\\'), char(9), '\\t'), char(10), '\\n'), char(13), '\\r') END"
        done
        sqlite3 -readonly "$db" "SELECT '$table' $expr FROM \"$table\" LIMIT 40"
    done
}

# small_log DB OUT: the first rows of a log in a file of 512-byte pages.
small_log() {
    local table
    {
        echo "PRAGMA page_size = 512; PRAGMA user_version = 1;"
        sqlite3 -readonly "$1" .schema
        echo "ATTACH '$1' AS src;"
        for table in sessions events summaries model_calls; do
            echo "INSERT INTO main.$table SELECT * FROM src.$table LIMIT 12;"
        done
        echo "DETACH src; VACUUM;"
    } | sqlite3 "$2"
}

# pack DIR: an OpenCode storage folder's JSON files as import_opencode's input.
pack() {
    (
        cd "$1"
        first=1
        find . -type f -name '*.json' | sed 's|^\./||' | LC_ALL=C sort |
            while IFS= read -r f; do
                [ $first = 1 ] || printf '\0'
                first=0
                printf '%s\n' "$f"
                cat "$f"
            done
    )
}

echo "seeding fuzz/corpus"
for db in "$root"/sample-sessions/*.db; do
    name=$(basename "$db" .db)
    seed log_file "$db" "$name.db"
    if [ $have_sqlite = 1 ]; then
        # Copied first: a reader may leave a -shm beside the file it opens.
        cp "$db" "$work/$name.db"
        rm -f "$work/small-$name.db"
        small_log "$work/$name.db" "$work/small-$name.db" && seed log_file "$work/small-$name.db" "small-$name.db"
        rows_of "$work/$name.db" sessions events summaries model_calls >"$work/$name.rows"
        seed log_rows "$work/$name.rows" "$name.rows"
        # Loaded halfway through, as a live view does; and without the types.
        awk 'NR == 20 { print "#load" } { print }' "$work/$name.rows" >"$work/$name-live.rows"
        seed log_rows "$work/$name-live.rows" "$name-live.rows"
        { echo "#relaxed"; head -n 30 "$work/$name.rows"; } >"$work/$name-relaxed.rows"
        seed log_rows "$work/$name-relaxed.rows" "$name-relaxed.rows"
    fi
done
[ $have_sqlite = 1 ] || echo "  (no sqlite3: log_rows and small log seeds skipped)"
for f in "$root"/tests/fixtures/claude-code-*.jsonl; do
    seed import_claude_code "$f" "$(basename "$f")"
done
for f in "$root"/tests/fixtures/codex-*.jsonl; do
    seed import_codex "$f" "$(basename "$f")"
done
for f in "$root"/tests/fixtures/otel/*; do
    seed import_otel "$f" "$(basename "$f")"
done
pack "$root/tests/fixtures/opencode" >"$work/opencode"
seed import_opencode "$work/opencode" fixture
{ printf 'opencode.db\n\0'; cat "$work/opencode"; } >"$work/opencode-db"
seed import_opencode "$work/opencode-db" fixture-db
for dir in "$here"/seeds/*/; do
    target=$(basename "$dir")
    for f in "$dir"*; do
        seed "$target" "$f" "$(basename "$f")"
    done
done
seed policy_toml "$root/assets/policy.toml" defaults.toml

if [ -d "$shared" ]; then
    while IFS= read -r f; do
        seed import_claude_code "$f" "shared-$(basename "$f")"
    done < <(find "$shared/claude-code" -name '*.jsonl')
    while IFS= read -r f; do
        seed import_codex "$f" "shared-$(basename "$f")"
    done < <(find "$shared/codex" -name '*.jsonl')
    while IFS= read -r f; do
        seed import_api "$f" "shared-$(basename "$f")"
    done < <(find "$shared/api" -name '*.json')
    if command -v python3 >/dev/null; then
        # `opencode export` JSON as the storage folder's files.
        while IFS= read -r f; do
            python3 - "$f" >"$work/export" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
sid = d["info"]["id"]
files = [(f"session/proj/{sid}.json", d["info"])]
for m in d["messages"]:
    files.append((f"message/{sid}/{m['info']['id']}.json", m["info"]))
    files += [(f"part/{m['info']['id']}/{p['id']}.json", p) for p in m["parts"]]
sys.stdout.buffer.write(b"\0".join(f"{p}\n{json.dumps(v)}".encode() for p, v in files))
EOF
            seed import_opencode "$work/export" "shared-$(basename "$f")"
        done < <(find "$shared/opencode" -name '*.json')
    fi
    if [ $have_sqlite = 1 ]; then
        for f in "$shared"/llm/*.sql; do
            rm -f "$work/llm.db"
            { echo "PRAGMA page_size = 512;"; cat "$f"; echo "VACUUM;"; } | sqlite3 "$work/llm.db" 2>/dev/null &&
                seed import_llm "$work/llm.db" "shared-$(basename "$f" .sql).db"
        done
    fi
fi

echo "building the targets"
cargo fuzz build -s none -a >/dev/null

mkdir -p artifacts/logs
printf '%-20s %10s %8s %8s %8s  %s\n' target inputs exec/s seconds corpus result
status=0
for t in "${targets[@]}"; do
    mkdir -p "corpus/$t" "artifacts/$t"
    start=$(date +%s)
    result=ok
    nice -n 10 cargo fuzz run -s none -a "$t" "corpus/$t" -- \
        -runs="$runs" -max_len="$(max_len "$t")" -timeout=30 -rss_limit_mb=3072 \
        -print_final_stats=1 >"artifacts/logs/$t.log" 2>&1 || { result=CRASH; status=1; }
    seconds=$(($(date +%s) - start))
    inputs=$(sed -n 's/^stat::number_of_executed_units: *//p' "artifacts/logs/$t.log" | tail -1)
    speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "artifacts/logs/$t.log" | tail -1)
    corpus=$(find "corpus/$t" -type f | wc -l)
    [ $result = ok ] || result="CRASH: $(grep -o 'artifacts/[^ ]*' "artifacts/logs/$t.log" | tail -1)"
    printf '%-20s %10s %8s %8s %8s  %s\n' "$t" "${inputs:--}" "${speed:--}" "$seconds" "$corpus" "$result"
done
exit $status
