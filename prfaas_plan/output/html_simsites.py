"""The report page of ``simulate --layout FILE`` with several PD sites (section ``sim_sites``: one row per site
and the total): the question, the answer with per-site TTFT and cost cards, the per-site table, TTFT and cost
per site as bars, the schedulers compared per site, what each did per site (role changes, the long-term
decisions and their reasons, the remote pool's arbitration, backlogs), the per-site and whole-layout timelines.
Nothing here computes a planning figure."""

from __future__ import annotations

from .html import Result, card_for, cell_value, e, fmt, table
from .html_blocks import bars, inputs_block, other_sections, section_html, warnings_block


def simulate_sites_page(res: Result) -> list[str]:
    rows = res.sections["sim_sites"]
    sites = [r for r in rows if r.get("site") != "total"]
    total = next((r for r in rows if r.get("site") == "total"), {})
    name = res.meta.get("layout") or "the layout"
    scheduler = res.meta.get("scheduler") or "static"
    question = (f"What latency and cost do requests see on layout {name}, {len(sites)} PD sites "
                f"({', '.join(str(s.get('site')) for s in sites)}) sharing one remote prefill pool, each over its "
                f"own link, when {res.meta.get('model') or 'the model'} is served at the planned rates with the "
                f"{scheduler} scheduler?")
    parts = []
    for s in sites:
        t = cell_value(s, "threshold_tokens")
        route = ("every prompt local" if t == float("inf") else f"t {fmt(t)} tokens") if t is not None else ""
        did = ""
        if scheduler != "static":
            did = (f"; the scheduler moved t {fmt(s.get('threshold_changes'))} times, changed "
                   f"{fmt(s.get('role_changes'))} roles and spilled {fmt(s.get('spilled'))} requests")
        parts.append(f"{s.get('site')}: TTFT P50 {fmt(s.get('ttft_p50_s'))} s, P99 {fmt(s.get('ttft_p99_s'))} s, "
                     f"{fmt(s.get('throughput_rps'))} req/s ({route}, link {fmt(s.get('link_utilization'), 'link_utilization')} "
                     f"used, RTT {fmt(s.get('rtt_ms'))} ms), ${fmt(s.get('usd_per_million_requests'))} per million "
                     f"requests{did}")
    answer = (f"In total {fmt(total.get('throughput_rps'))} requests/s of {fmt(total.get('planned_rps'))} planned, "
              f"TTFT P50 {fmt(total.get('ttft_p50_s'))} s, P90 {fmt(total.get('ttft_p90_s'))} s, P99 "
              f"{fmt(total.get('ttft_p99_s'))} s. " + "; ".join(parts) + ".")
    cards = [card_for(total, "ttft_p99_s", "total TTFT P99 (s)"),
             card_for(total, "usd_per_million_requests", "total USD per million requests")]
    cards += [card_for(s, "ttft_p99_s", f"{s.get('site')} TTFT P99 (s)") for s in sites]
    labels = [str(s.get("site")) for s in sites]
    plots = [bars(labels, [float(s.get("ttft_p99_s") or 0) for s in sites], "TTFT P99 (s)",
                  caption="Simulated TTFT P99 of each site's requests.", first_red=False),
             bars(labels, [float(s.get("usd_per_million_requests") or 0) for s in sites], "USD per million requests",
                  caption="Each site's own chips and link, plus its share of the remote pool (by remote prefill "
                          "seconds used), per million requests served.", first_red=False)]
    body = [f'<h2>The question</h2><p class="question">{e(question)}</p>', inputs_block(res),
            f'<h2>The answer</h2><p class="verdict">{e(answer)}</p><div class="cards">{"".join(cards)}</div>',
            warnings_block(res.warnings), "<h2>Sites</h2>", table(rows, transpose=True), *plots]
    shown = {"sim_sites"}
    if res.sections.get("comparison"):
        body.append(section_html("Schedulers per site", res.sections["comparison"]))
        shown.add("comparison")
    for name, title in (("roles", "Role changes per site"), ("decisions", "What the long-term rule decided and why"),
                        ("backlogs", "Arbitration, peak backlogs and spilling per site")):
        if res.sections.get(name):
            body.append(section_html(title, res.sections[name]))
            shown.add(name)
    return body + other_sections(res, shown)
