"""Checks deploy/grafana/folio-dashboard.json against the metrics folio exports.

- every metric an expression names is one the scheduler or the workers register
  (names read from scheduler/server/scheduler_metrics.cc, worker/worker_metrics.cc)
  and one docs/operations.md documents;
- every panel and every query uses the ${datasource} variable;
- every metric selector filters on the $model variable;
- the required panels are there, and the expressions parse (promtool, when present).

Run: /usr/bin/python3 tests/deploy/dashboard_test.py [REPO_ROOT]
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.abspath(sys.argv.pop(1) if len(sys.argv) > 1 else
                       os.path.join(os.path.dirname(__file__), "..", ".."))
DASHBOARD = os.path.join(ROOT, "deploy", "grafana", "folio-dashboard.json")
SOURCES = [os.path.join(ROOT, "scheduler", "server", "scheduler_metrics.cc"),
           os.path.join(ROOT, "scheduler", "openai", "openai_service.cc"),
           os.path.join(ROOT, "worker", "worker_metrics.cc")]
DOC = os.path.join(ROOT, "docs", "operations.md")
HIST_SUFFIXES = ("_bucket", "_sum", "_count")
METRIC_RE = re.compile(r"\bfolio_[a-z0-9_]+")

REQUIRED_PANELS = {
    "KV cache block usage by pool": ["folio_kv_cache_usage_ratio"],
    "KV cache token usage and fragmentation": ["folio_kv_cache_token_usage_ratio",
                                               "folio_kv_cache_fragmentation_ratio"],
    "Requests running / waiting / swapped": ["folio_requests_running", "folio_requests_waiting",
                                             "folio_requests_swapped"],
    "Preemption rate by mode": ["folio_preemptions_total"],
    "Prefix cache hit rate": ["folio_prefix_cache_hits_total", "folio_prefix_cache_queries_total"],
    "Time to first token": ["folio_time_to_first_token_seconds_bucket"],
    "Inter-token latency": ["folio_inter_token_latency_seconds_bucket"],
    "End-to-end request latency": ["folio_e2e_request_latency_seconds_bucket"],
    "Token throughput": ["folio_prompt_tokens_total", "folio_generation_tokens_total"],
    "Step duration": ["folio_step_duration_seconds_bucket"],
    "Finish reasons": ["folio_request_success_total"],
}


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def source_metrics():
    names = set()
    for path in SOURCES:
        names |= set(re.findall(r'"(folio_[a-z0-9_]+)"', read(path)))
    return names


def doc_metrics():
    return set(re.findall(r"`(folio_[a-z0-9_]+)`", read(DOC)))


def all_panels(panels):
    for p in panels:
        yield p
        yield from all_panels(p.get("panels", []))


def base_name(name, known):
    if name in known:
        return name
    for suffix in HIST_SUFFIXES:
        if name.endswith(suffix) and name[: -len(suffix)] in known:
            return name[: -len(suffix)]
    return None


class DashboardTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dash = json.loads(read(DASHBOARD))
        cls.panels = [p for p in all_panels(cls.dash["panels"]) if p.get("type") != "row"]
        cls.known = source_metrics()
        cls.exprs = [(p["title"], t["expr"]) for p in cls.panels for t in p.get("targets", [])]

    def test_sources_define_the_metrics(self):
        # Guards the name parsing itself: a refactor of the .cc files must not
        # silently leave an empty list (which would make every check below vacuous).
        for name in ("folio_kv_cache_usage_ratio", "folio_time_to_first_token_seconds",
                     "folio_build_info", "folio_worker_step_seconds"):
            self.assertIn(name, self.known)

    def test_schema(self):
        self.assertGreaterEqual(self.dash["schemaVersion"], 36)
        ids = [p["id"] for p in self.panels]
        self.assertEqual(len(ids), len(set(ids)), "panel ids must be unique")
        for p in self.panels:
            self.assertIn(p["type"], ("timeseries", "stat"), p["title"])
            self.assertIn("gridPos", p, p["title"])
            self.assertTrue(p.get("targets"), "%s has no queries" % p["title"])

    def test_template_variables(self):
        vs = {v["name"]: v for v in self.dash["templating"]["list"]}
        self.assertEqual(vs["datasource"]["type"], "datasource")
        self.assertEqual(vs["datasource"]["query"], "prometheus")
        model = vs["model"]
        self.assertEqual(model["type"], "query")
        q = model["query"]["query"] if isinstance(model["query"], dict) else model["query"]
        self.assertEqual(q.replace(" ", ""), "label_values(folio_build_info,model)")
        self.assertEqual(model["datasource"]["uid"], "${datasource}")

    def test_every_panel_uses_the_datasource_variable(self):
        for p in self.panels:
            self.assertEqual(p["datasource"], {"type": "prometheus", "uid": "${datasource}"}, p["title"])
            for t in p["targets"]:
                self.assertEqual(t.get("datasource", p["datasource"])["uid"], "${datasource}", p["title"])

    def test_metric_names_exist(self):
        documented = doc_metrics()
        for title, expr in self.exprs:
            names = METRIC_RE.findall(expr)
            self.assertTrue(names, "%s: %r names no folio_ metric" % (title, expr))
            for name in names:
                base = base_name(name, self.known)
                self.assertIsNotNone(base, "%s: %s is not a metric folio exports" % (title, name))
                self.assertIn(base, documented, "%s: %s is not in docs/operations.md" % (title, base))

    def test_every_selector_filters_on_model(self):
        for title, expr in self.exprs:
            for m in re.finditer(r"\b(folio_[a-z0-9_]+)(\{[^}]*\})?", expr):
                self.assertIsNotNone(m.group(2), "%s: %s has no selector" % (title, m.group(1)))
                self.assertIn('model=~"$model"', m.group(2), "%s: %s does not filter on $model" % (title, m.group(1)))

    def test_required_panels(self):
        by_title = {p["title"]: " ".join(t["expr"] for t in p["targets"]) for p in self.panels}
        for title, metrics in REQUIRED_PANELS.items():
            self.assertIn(title, by_title)
            for metric in metrics:
                self.assertIn(metric, by_title[title], title)
        self.assertIn('pool="device"', " ".join(e for _, e in self.exprs))
        self.assertRegex(by_title["Preemption rate by mode"], r"sum by \(mode\) \(rate\(folio_preemptions_total\{[^}]*\}\[\$__rate_interval\]\)\)")
        self.assertRegex(by_title["Finish reasons"], r"by \(finish_reason\)")
        for title in ("Time to first token", "Inter-token latency", "End-to-end request latency", "Step duration"):
            for q in ("0.50", "0.90", "0.99"):
                self.assertIn("histogram_quantile(%s," % q, by_title[title], title)

    def test_short_rate_windows_follow_the_scrape_interval(self):
        # A fixed [1m] is empty or sparse once the scrape interval is 30s or more
        # (serviceMonitor.interval); $__rate_interval is at least four intervals.
        for title, expr in self.exprs:
            self.assertNotRegex(expr, r"\[[0-9]+s\]|\[1m\]", title)

    @unittest.skipIf(shutil.which("promtool") is None, "promtool not installed")
    def test_expressions_parse(self):
        # promtool has no bare "check expression"; a rules file with one recording
        # rule per query makes it parse every expression.
        lines = ["groups:", "  - name: dashboard", "    rules:"]
        for i, (_, expr) in enumerate(self.exprs):
            e = expr.replace("$model", ".*").replace("$__rate_interval", "5m")
            lines += ["      - record: dashboard:q%d" % i, "        expr: %s" % json.dumps(e)]
        with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False) as f:
            f.write("\n".join(lines) + "\n")
        try:
            r = subprocess.run(["promtool", "check", "rules", f.name], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        finally:
            os.unlink(f.name)


if __name__ == "__main__":
    unittest.main()
