#!/usr/bin/env python3
"""Writes deploy/kubernetes/monitoring/prometheusrule.yaml: kernel-watchdog.rules.yml as a
PrometheusRule for the Prometheus Operator, its groups copied as they are (comments too).
tests/integration/test_prometheus.py holds the two equal; run this after changing the rules."""
import pathlib

HERE = pathlib.Path(__file__).resolve().parent
RULES = HERE / "kernel-watchdog.rules.yml"
OUT = HERE.parent / "kubernetes" / "monitoring" / "prometheusrule.yaml"

HEADER = """\
# Written by deploy/prometheus/prometheusrule.py from deploy/prometheus/kernel-watchdog.rules.yml
# (edit that file, then run the script). For the Prometheus Operator (kube-prometheus-stack):
# its Prometheus selects rules by label, kube-prometheus-stack's by `release: <its release>`
# unless ruleSelectorNilUsesHelmValues=false; add the label your Prometheus selects.
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: kernel-watchdog
  labels:
    app.kubernetes.io/name: kernel-watchdog
spec:
"""


def main():
    text = RULES.read_text()
    groups = text[text.index("\ngroups:") + 1:]
    OUT.write_text(HEADER + "".join("  " + line if line.strip() else line
                                    for line in groups.splitlines(keepends=True)))


if __name__ == "__main__":
    main()
