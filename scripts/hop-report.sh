#!/usr/bin/env bash
# Where a QD1 request's time goes, from the hop marks that NTBLEND_HOP_TRACE=DIR makes the
# processes write (src/wait/hop.h): the vhost-user-blk back end in ntblend-vm (kick, pop,
# submit, cpl, call) and the NVMe model in the lender's agent (fetch, post), one clock for all.
# Usage: scripts/hop-report.sh [-j] DIR
#   -j   print JSON (one object: each hop's count, median and 90th percentile in ns)
# A request counts when it was the only one the back end held from taking it to signalling
# the guest (fio at iodepth 1). Each hop, for those requests:
#   guest        the call eventfd written for the one before -> this request taken off the ring
#                (QEMU interrupting the guest, the guest's driver, fio, the next kick)
#   pop-submit   the request taken -> its NVMe command's doorbell rung
#   submit-fetch the doorbell -> the NVMe model fetching the command (its thread's wake-up)
#   fetch-post   the model executing it (the data's DMA) -> its completion posted
#   post-cpl     the completion posted -> the back end seeing it
#   cpl-call     the completion seen -> the call eventfd written
# and the share of requests for which the back end was asleep on the kick eventfd, and for
# which the NVMe model fetched the command on the CPU the back end submitted it from (marks
# carry their CPU; files without it count as not known).
set -euo pipefail
json=0
[ "${1:-}" = -j ] && { json=1; shift; }
case "${1:-}" in
  -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  "") echo "hop-report: which directory? (usage: scripts/hop-report.sh [-j] DIR)" >&2; exit 2 ;;
esac
dir=$1
[ -d "$dir" ] || { echo "hop-report: $dir is not a directory (the one NTBLEND_HOP_TRACE named)" >&2; exit 2; }
shopt -s nullglob
files=("$dir"/hop.*)
[ ${#files[@]} -gt 0 ] || { echo "hop-report: no hop.* files in $dir: was NTBLEND_HOP_TRACE=$dir set for ntblend up and the VM, and did they end?" >&2; exit 1; }

grep -hv '^#' "${files[@]}" | sort -n -k1,1 | awk '
  function reset() { n_pop = 0; n_sub = 0; t_pop = t_sub = t_fetch = t_post = t_cpl = 0; slept = 0
                     c_sub = c_fetch = "" }
  BEGIN { reset(); last_call = 0; kicked = 0; held = 0 }
  $2 == "kick" { kicked = 1; next }
  $2 == "pop" {
    if (held) { n_pop++; next }          # more than one held: not a QD1 request
    reset(); n_pop = 1; held = 1; t_pop = $1; slept = kicked; kicked = 0; prev = last_call; next }
  $2 == "submit" { n_sub++; if (!t_sub) { t_sub = $1; c_sub = $4 }; next }
  $2 == "fetch" { if (held && !t_fetch) { t_fetch = $1; c_fetch = $4 }; next }
  $2 == "post" { if (held) t_post = $1; next }
  $2 == "cpl" { if (held) { t_cpl = $1; held = 0 }; next }
  $2 == "call" {
    if (n_pop == 1 && n_sub == 1 && t_fetch >= t_sub && t_post && t_cpl) {
      if (prev) print "guest", t_pop - prev
      print "pop-submit", t_sub - t_pop
      print "submit-fetch", t_fetch - t_sub
      print "fetch-post", t_post - t_fetch
      print "post-cpl", t_cpl - t_post
      print "cpl-call", $1 - t_cpl
      print "slept-on-kick", slept
      if (c_sub != "" && c_sub >= 0 && c_fetch != "" && c_fetch >= 0) print "one-cpu", (c_sub == c_fetch)
    }
    last_call = $1; n_pop = 0; next }
' | sort -k1,1 -k2,2n | awk -v json="$json" '
  function flush() {
    if (!k) return
    if (name == "slept-on-kick") { sum = 0; for (i = 1; i <= k; i++) sum += v[i]; shr = sum / k }
    else if (name == "one-cpu") { sum = 0; for (i = 1; i <= k; i++) sum += v[i]; one = sum / k; n_one = k }
    else { med = v[int((k + 1) / 2)]; p90 = v[int(k * 9 / 10) > 0 ? int(k * 9 / 10) : 1]
           m++; cnt[name] = k; md[name] = med; p9[name] = p90 }
    k = 0 }
  { if ($1 != name) { flush(); name = $1 }; v[++k] = $2 }
  END {
    flush()
    nh = split("guest pop-submit submit-fetch fetch-post post-cpl cpl-call", all, " "); m = 0
    for (i = 1; i <= nh; i++) if (all[i] in cnt) order[++m] = all[i]
    if (!m) { print "hop-report: no QD1 request found (was fio at iodepth 1 running?)" > "/dev/stderr"; exit 1 }
    if (json) {
      printf "{\"requests\": %d, \"slept_on_kick\": %.3f, ", cnt["pop-submit"], shr
      if (n_one) printf "\"one_cpu\": %.3f, ", one
      printf "\"hops\": {"
      for (i = 1; i <= m; i++) printf "%s\"%s\": {\"count\": %d, \"median_ns\": %d, \"p90_ns\": %d}", (i > 1 ? ", " : ""), order[i], cnt[order[i]], md[order[i]], p9[order[i]]
      print "}}"
    } else {
      printf "%d QD1 requests; the back end was asleep on the kick for %.0f%% of them\n", cnt["pop-submit"], shr * 100
      if (n_one) printf "the model fetched the command on the back end'"'"'s CPU for %.0f%% of them\n", one * 100
      printf "%-14s %10s %10s\n", "hop", "median", "p90"
      for (i = 1; i <= m; i++) printf "%-14s %8.1f us %8.1f us\n", order[i], md[order[i]] / 1000, p9[order[i]] / 1000
    }
  }'
