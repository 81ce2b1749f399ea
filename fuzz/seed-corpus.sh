#!/bin/sh
# Seeds fuzz/corpus/analyze_pipeline/ and fuzz/corpus/capture_reader/ with every capture in
# the repository (testdata/, specimens/, examples/: .pcap, .pcapng, and .gz decompressed, since
# gzip is the shell's and the fuzz targets read uncompressed bytes). The corpora are not
# committed (.gitignore: /fuzz/corpus); run this again after a fresh clone. Usage, from the
# repository or fuzz/: fuzz/seed-corpus.sh
set -eu
cd "$(dirname "$0")/.."
for target in analyze_pipeline capture_reader; do
    out="fuzz/corpus/$target"
    mkdir -p "$out"
    n=0
    for f in $(find testdata specimens examples -type f \
        \( -name '*.pcap' -o -name '*.pcapng' -o -name '*.gz' -o -path 'testdata/malformed/*' \) \
        ! -name '*.tshark' ! -name EXPECTED ! -name 'EXPECTED_*' | sort); do
        name=$(printf '%s' "$f" | tr '/' '_')
        case "$f" in
            *.gz) gzip -dc "$f" > "$out/${name%.gz}" 2>/dev/null || cp "$f" "$out/$name" ;;
            *) cp "$f" "$out/$name" ;;
        esac
        n=$((n + 1))
    done
    echo "$out: $n captures"
done
