# Sourced by scripts/bench-ring.sh (not run on its own): its fig4b, the ring seed's Fig. 4b
# (openshmem-switchless-ntb-ring §5.1): where a put's time goes in software. On the ring5 fabric
# bench-ring.sh has up, for each size, one ring_bench --mode lat job (put + shmem_quiet, PE 0 ->
# PE 2, through host b's node) with SHMEM_PROFILE=json; PE 0's profile line (src/shmem/prof.c)
# gives each stage's sum over its chunks. Written: fig4b.json, fig4b.tsv (us per put by stage),
# fig4b.png (stacked bars, tools/plots/ring4b.gp), and a table with the paper's steps beside.
# Uses bench-ring.sh's variables: bin, rb, fabric, nhosts, outdir, log, quick, me, plot, src.

fig4b_stages=(wait stage dma publish doorbell relay deliver ack quiet)

# fig4b_job SIZE: one profiled job; prints "BENCH_JSON<TAB>PROFILE_JSON" of PE 0.
fig4b_job() {
    local size=$1 attempt rc out err line prof iters reps
    iters=$((quick ? 20 : 50)) reps=$((quick ? 3 : 5))
    for attempt in 1 2; do
        out=$(mktemp) err=$(mktemp) rc=0
        SHMEM_PROFILE=json timeout 180 "$bin/oshrun" -np "$nhosts" --fabric "$fabric" "$rb" --mode lat \
            --target 2 --sizes "$size" --iters "$iters" --reps "$reps" >"$out" 2>"$err" || rc=$?
        { echo "== fig4b: ring_bench --mode lat --target 2 --sizes $size, SHMEM_PROFILE=json (exit $rc, attempt $attempt)"
          cat "$out" "$err"; } >>"$log"
        line=$(grep '^{"bench"' "$out" | tail -n1 || true)
        prof=$(grep '^{"shmem_profile"' "$err" | jq -c 'select(.shmem_profile.pe == 0) | .shmem_profile' 2>/dev/null | tail -n1 || true)
        rm -f "$out" "$err"
        if [ $rc -eq 0 ] && [ -n "$line" ] && [ -n "$prof" ] && grep -q '"verified":true' <<<"$line"; then
            printf '%s\t%s\n' "$line" "$prof"
            return 0
        fi
        echo "$me: fig4b at $size: exit $rc${line:+, $line}" >&2
        echo x >>"$retry_file"
    done
    tail -n 20 "$log" >&2
    die "ring_bench with SHMEM_PROFILE=json failed twice at $size (messages in $log)"
}

# fig4b_run SIZE...: every size on the fabric that is up; results into $outdir/fig4b.json.
fig4b_run() {
    command -v jq >/dev/null || die "fig4b needs jq (apt-get install jq)"
    local s rows=() r
    for s in "$@"; do
        echo "$me: [ring5] fig4b: put + quiet PE 0 -> PE 2 at $s bytes with SHMEM_PROFILE=json" >&2
        r=$(fig4b_job "$s")
        # Per put: the chunks' stage sums / puts (a put of more than a chunk adds its chunks'
        # stages, which overlap in time); quiet per quiet.
        rows+=("$(jq -c -n --argjson size "$s" --argjson b "${r%%$'\t'*}" --argjson p "${r#*$'\t'}" '
            ($p.chunks / ((($size + $p.chunk - 1) / $p.chunk) | floor)) as $puts
            | ($p.stages_ns | to_entries | map({key, value: ((if .key == "quiet"
                  then (if $p.quiets > 0 then .value / $p.quiets else 0 end)
                  else (if $puts > 0 then .value / $puts else 0 end) end) / 1000)}) | from_entries) as $us
            | ([$us[]] | add) as $tot
            | {size: $size, puts: $puts, chunks: $p.chunks, hops_per_chunk: (if $p.chunks > 0 then $p.hops / $p.chunks else 0 end),
               us_per_put: $us, total_us: $tot,
               pct: ($us | map_values(if $tot > 0 then . * 100 / $tot else 0 end)),
               put_quiet_us: $b.results[0].put_us, profile: $p, bench: $b}')")
    done
    {
        printf '{"figure":"fig4b","mirrors":"seed Fig. 4b: where a put'"'"'s time goes in software (SHMEM_PROFILE stages)","hosts":5,%s,\n' "$(header)"
        printf ' "experiment":"ring_bench --mode lat --target 2 (put + shmem_quiet, PE 0 -> PE 2 through host b'"'"'s node), SHMEM_PROFILE=json; PE 0'"'"'s stage sums / puts (quiet: / quiets)",\n'
        printf ' "sizes":[%s]}\n' "$(IFS=,; echo "${rows[*]}")"
    } >"$outdir/fig4b.json"
}

# fig4b_report: fig4b.tsv, the tables, the plot.
fig4b_report() {
    local j=$outdir/fig4b.json
    {
        printf 'size'; printf '\t%s' "${fig4b_stages[@]}"; echo
        jq -r '.sizes[] | [(if .size >= 1048576 then "\(.size / 1048576) MiB" else "\(.size / 1024) KiB" end),
            (.us_per_put | .wait, .stage, .dma, .publish, .doorbell, .relay, .deliver, .ack, .quiet)] | @tsv' "$j"
    } >"$outdir/fig4b.tsv"
    echo
    echo "fig4b: where a put's time goes, PE 0 -> PE 2 through host b's node (us per put, % of its total)"
    printf '%-8s' size; printf ' %14s' "${fig4b_stages[@]}"; printf ' %9s %10s\n' total put+quiet
    jq -r '.sizes[] | [.size, (.us_per_put | .wait, .stage, .dma, .publish, .doorbell, .relay, .deliver, .ack, .quiet),
        (.pct | .wait, .stage, .dma, .publish, .doorbell, .relay, .deliver, .ack, .quiet), .total_us, .put_quiet_us] | @tsv' "$j" |
        awk -F'\t' '{ printf "%-8s", ($1 >= 1048576 ? $1 / 1048576 "M" : $1 / 1024 "K")
            for (i = 2; i <= 10; i++) printf " %7.1f (%3.0f%%)", $i, $(i + 9)
            printf " %9.1f %10.1f\n", $20, $21 }'
    echo
    echo "beside the paper's steps (Fig. 4b; its text ranks them, the values are in the figure only):"
    printf '%-48s %-44s %s\n' "paper's step" "ours" "share at the largest size"
    local big
    big=$(jq -c '.sizes | max_by(.size) | .pct' "$j")
    fig4b_pct() { jq -r "$1 | . * 10 | round / 10" <<<"$big"; }
    printf '%-48s %-44s %s %%\n' "address translation settings for NTB" "none per put: windows are mapped at start-up" 0 \
        "waiting for available interrupts" "wait (a staging chunk, ring room)" "$(fig4b_pct .wait)" \
        "DMA data transfer (the data's own time)" "stage + dma + deliver" "$(fig4b_pct '(.stage + .dma + .deliver)')" \
        "scratchpad registers: source, destination, size" "publish (a descriptor in the inbox's memory)" "$(fig4b_pct .publish)" \
        "interrupt handling with the doorbell register" "doorbell (doorbell -> the node's thread)" "$(fig4b_pct .doorbell)" \
        "(not broken out in the paper)" "relay + ack + quiet" "$(fig4b_pct '(.relay + .ack + .quiet)')"
    echo "paper: the scratchpad accesses and the doorbell interrupts are relatively high overheads"
    if [ "$plot" = 1 ]; then
        gnuplot -e "dir='$src/tools/plots/'; in='$outdir/fig4b.tsv'; out='$outdir/fig4b.png'; title='Fig. 4b: where a put + quiet PE 0 -> PE 2 spends its time, 5-host ring ($(
            [ "$latency" = 1 ] && echo "latency model on" || echo "latency model off"))'" "$src/tools/plots/ring4b.gp" ||
            echo "$me: gnuplot failed on fig4b" >&2
    fi
}
