"""The check's report: one line an assertion, failures kept for the summary."""

import json

class Report:
    def __init__(self, name):
        self.name, self.ok_count, self.failures = name, 0, []

    def section(self, title):
        print(f"\n  -- {title}")

    def ok(self, what):
        self.ok_count += 1
        print(f"    ok    {what}")

    def fail(self, what, detail=""):
        self.failures.append(what)
        print(f"    FAIL  {what}")
        for line in str(detail).splitlines():
            print(f"            {line}")

    def info(self, what):
        print(f"    info  {what}")

    def check(self, what, cond, detail=""):
        if cond:
            self.ok(what)
        else:
            self.fail(what, detail)
        return cond

    def equal(self, what, actual, expected):
        return self.check(f"{what} = {short(expected)}", actual == expected,
                          f"expected {expected!r}\ngot      {actual!r}")


def short(v, n=90):
    if v is None or v == "":
        return "none" if v is None else '""'
    s = v if isinstance(v, str) else json.dumps(v, default=str)
    return s if len(s) <= n else s[: n - 3] + "..."
