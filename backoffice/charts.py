"""Server-rendered SVG bar charts for the admin dashboard.

Written here rather than vendoring a JavaScript chart library: a stacked bar
per day is a few rectangles, the page then needs no script (and no CDN), it
prints, and it reads the same with scripts off. Each bar segment carries its
day, series and value as data attributes and a <title> tooltip.
"""

from datetime import date

from django.utils.html import format_html, format_html_join

# Colour-blind-safe (Okabe–Ito) colours, one per series in order.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00")
WIDTH, HEIGHT, LEFT, BOTTOM, TOP = 720, 200, 36, 22, 8


def stacked_bars_svg(*, title: str, days: list[date], series: dict[str, list[int]], labels: dict[str, str]) -> str:
    """An SVG of one stacked bar per day, `series` (key → count per day) stacked in order, with a legend."""
    totals = [sum(values[n] for values in series.values()) for n in range(len(days))]
    peak = max(totals, default=0) or 1
    plot_h = HEIGHT - BOTTOM - TOP
    step = (WIDTH - LEFT) / max(len(days), 1)
    bar_w = max(step * 0.8, 1)
    rects = []
    for n, day in enumerate(days):
        y = HEIGHT - BOTTOM
        for index, (key, values) in enumerate(series.items()):
            value = values[n]
            if not value:
                continue
            h = value / peak * plot_h
            y -= h
            rects.append((
                f"{LEFT + n * step + (step - bar_w) / 2:.1f}", f"{y:.1f}", f"{bar_w:.1f}", f"{h:.1f}",
                PALETTE[index % len(PALETTE)], day.isoformat(), key, value, f"{day:%b %d}: {labels[key]} {value}",
            ))  # fmt: skip
    bars = format_html_join(
        "",
        '<rect class="bar" x="{}" y="{}" width="{}" height="{}" fill="{}" data-day="{}" data-series="{}"'
        ' data-value="{}"><title>{}</title></rect>',
        rects,
    )
    label_every = max(len(days) // 8, 1)
    ticks = format_html_join(
        "",
        '<text x="{}" y="{}" font-size="10" text-anchor="middle" fill="#555">{}</text>',
        (
            (f"{LEFT + n * step + step / 2:.1f}", HEIGHT - 6, f"{day:%b %d}")
            for n, day in enumerate(days)
            if n % label_every == 0
        ),
    )
    legend = format_html_join(
        "",
        '<span class="legend-item"><i style="background:{}"></i>{} ({})</span>',
        ((PALETTE[i % len(PALETTE)], labels[key], sum(values)) for i, (key, values) in enumerate(series.items())),
    )
    return format_html(
        '<figure class="chart"><svg role="img" aria-label="{}" viewBox="0 0 {} {}" width="100%"'
        ' preserveAspectRatio="none" xmlns="http://www.w3.org/2000/svg">'
        '<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="#999"/>'
        '<text x="2" y="{}" font-size="10" fill="#555">{}</text>'
        '<text x="2" y="{}" font-size="10" fill="#555">0</text>{}{}</svg>'
        "<figcaption>{}</figcaption></figure>",
        title, WIDTH, HEIGHT, LEFT, HEIGHT - BOTTOM, WIDTH, HEIGHT - BOTTOM, TOP + 10, peak, HEIGHT - BOTTOM, bars,
        ticks, legend,
    )  # fmt: skip
