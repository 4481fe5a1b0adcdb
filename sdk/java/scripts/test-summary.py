"""Prints one line for the Surefire reports: 'java: N passed, N failed, N skipped', and the
failed tests' names (Maven runs with -q, which hides Surefire's own summary)."""

import sys
import xml.etree.ElementTree as ET
from pathlib import Path

reports = Path(sys.argv[1])
passed = failed = skipped = 0
failures = []
for path in sorted(reports.glob("TEST-*.xml")):
    for case in ET.parse(path).getroot().iter("testcase"):
        name = f"{case.get('classname', '').rsplit('.', 1)[-1]}.{case.get('name')}"
        if case.find("failure") is not None or case.find("error") is not None:
            failed += 1
            failures.append(name)
        elif case.find("skipped") is not None:
            skipped += 1
        else:
            passed += 1
for name in failures:
    print(f"java: FAILED {name} (see {reports}/)")
print(f"java: {passed} passed, {failed} failed" + (f", {skipped} skipped" if skipped else ""))
