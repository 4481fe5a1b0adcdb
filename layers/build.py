"""Build the Lambda layer: the ``baton`` core package plus its runtime dependencies.

Output is ``<out>/python/`` (Lambda puts ``/opt/python`` on ``sys.path``); the CDK app deploys
``<out>`` as the layer asset. The build is reproducible from PyPI alone:

* wheels only, for Lambda's platform (``--platform`` manylinux2014 *and* manylinux_2_28: with one
  tag pip silently falls back to older releases), every distribution pinned with ``==`` in
  ``layers/requirements.txt`` and installed with ``--no-deps``; a closure check then fails the
  build if any installed distribution needs something that is neither pinned nor provided by
  the Lambda runtime;
* debug sections stripped from the wheels' shared objects (llvm-strip, when the machine has it);
* bytecode compiled by the target Python with ``unchecked-hash`` .pyc files and ``/opt/python``
  paths, so the asset hash depends on content only and cold starts skip compilation.

Wheels are kept in a wheelhouse under ``~/.cache/baton/pip`` (``$XDG_CACHE_HOME/baton/pip``),
one folder per platform and Python: ``pip download`` fetches only the pinned wheels the folder
lacks, and the layer is installed from the folder with ``--no-index``. So once a build has run
online, later builds (another checkout, a wiped ``layers/build``) need no network; pip's own HTTP
cache could not promise that (it revalidates index pages online, and some registries answer
uncacheable). A build that needs a wheel it cannot download stops with one message naming the
missing wheels and what to do, not pip's traceback.

The pip step is skipped while a stamp says requirements, platform and Python are unchanged;
the ``baton`` copy is refreshed whenever ``shared/baton`` differs from what the layer holds
(compared by content, so an unchanged tree is left alone: a synth may be reading it). Builds of
the same folder are serialized with a lock under ~/.cache/baton.

Usage: ``python layers/build.py [--arch arm64|x86_64] [--python-version 3.12] [--out DIR]``
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from importlib.metadata import Distribution, PathDistribution
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
REQUIREMENTS = ROOT / "layers" / "requirements.txt"
PACKAGE_SRC = ROOT / "shared" / "baton"
# The Lambda glue every function imports; it ships in the layer next to the core.
PACKAGE_SRCS = (PACKAGE_SRC, ROOT / "functions" / "_lib" / "baton_lambda")
DEFAULT_OUT = ROOT / "layers" / "build"
LAYER_MOUNT = "/opt/python"  # where Lambda mounts the layer's python/ folder
STAMP_NAME = ".layer-deps.sha256"
PACKAGE_STAMP_NAME = ".layer-baton.sha256"
# Bump when the way dependencies are installed changes, to invalidate existing stamps.
BUILD_FORMAT = "4"  # 3: debug sections stripped; 4: unused parts dropped (UNUSED, slim metadata)
# The most the layer may hold, unzipped (tests/infra/test_layer.py checks the deployed layer).
SIZE_LIMIT_BYTES = 40_000_000

# Shipped by the Lambda Python runtime (/var/runtime): never bundled, accepted by the closure check.
RUNTIME_PROVIDED = frozenset(
    {"boto3", "botocore", "s3transfer", "python-dateutil", "urllib3", "six"}
)
ARCH_TO_MACHINE = {"arm64": "aarch64", "aarch64": "aarch64", "x86_64": "x86_64", "amd64": "x86_64"}
# Not needed at run time and machine-specific (console-script shebangs) or bulky.
PRUNE_DIRS = ("bin",)
IGNORED = ("__pycache__", "*.pyc", "*.pyo", "tests", ".mypy_cache")
COPY_IGNORE = shutil.ignore_patterns(*IGNORED)
# Parts of the pinned distributions that no function imports, dropped from the layer so it stays
# within SIZE_LIMIT_BYTES. Each is a whole package or a data file; the build fails if a module
# left in the layer names a dropped package (check_unreferenced), and tests/infra/test_layer.py
# imports every function's handler from the layer alone.
UNUSED = (
    # Powertools utilities Baton does not use (it uses the logger, the metrics and the REST
    # event handler, none of which imports these): 1.8 MB.
    "aws_lambda_powertools/utilities/auth_alpha",
    "aws_lambda_powertools/utilities/batch",
    "aws_lambda_powertools/utilities/circuit_breaker",
    "aws_lambda_powertools/utilities/data_masking",
    "aws_lambda_powertools/utilities/feature_flags",
    "aws_lambda_powertools/utilities/idempotency",
    "aws_lambda_powertools/utilities/kafka",
    "aws_lambda_powertools/utilities/metadata",
    "aws_lambda_powertools/utilities/parameters",
    "aws_lambda_powertools/utilities/parser",
    "aws_lambda_powertools/utilities/streaming",
    # The Swagger UI's script and style, served by the resolver's enable_swagger() only (Baton
    # serves its own OpenAPI document and never calls it): 1.7 MB.
    "aws_lambda_powertools/event_handler/openapi/swagger_ui/swagger-ui-bundle.min.js",
    "aws_lambda_powertools/event_handler/openapi/swagger_ui/swagger-ui.min.css",
    # protobuf's test messages.
    "google/protobuf/testdata",
)
# Type stubs are for type checkers; nothing imports them.
UNUSED_PATTERNS = ("*.pyi",)
# pip's install records (uninstalling): importlib.metadata reads METADATA's headers (versions,
# Requires-Dist), entry_points.txt and top_level.txt, which stay, with the licenses.
PIP_RECORDS = ("RECORD", "INSTALLER", "WHEEL", "REQUESTED", "direct_url.json")


@dataclass(frozen=True, slots=True)
class Target:
    machine: str  # aarch64 | x86_64
    python_version: str  # "3.12"

    @property
    def platforms(self) -> tuple[str, ...]:
        return (f"manylinux2014_{self.machine}", f"manylinux_2_28_{self.machine}")

    @property
    def marker_env(self) -> dict[str, str]:
        """PEP 508 marker values of Lambda's interpreter, for the closure check."""
        return {
            "python_version": self.python_version,
            "python_full_version": f"{self.python_version}.0",
            "sys_platform": "linux",
            "platform_system": "Linux",
            "platform_machine": self.machine,
            "os_name": "posix",
            "implementation_name": "cpython",
            "platform_python_implementation": "CPython",
            "extra": "",
        }


def log(message: str) -> None:
    print(f"[layer] {message}", flush=True)


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "baton" / "pip"


def wheelhouse(target: Target) -> Path:
    """The pinned wheels of ``target``, kept across builds and checkouts."""
    return cache_dir() / "wheels" / f"cp{target.python_version.replace('.', '')}-{target.machine}"


class OfflineError(SystemExit):
    """A wheel the layer needs is neither in the wheelhouse nor downloadable: the message says
    which and what to do (raised as SystemExit, so no traceback)."""


def deps_stamp(target: Target, compiled: bool, stripped: bool = False) -> str:
    digest = hashlib.sha256()
    for part in (
        BUILD_FORMAT,
        REQUIREMENTS.read_text(),
        " ".join(target.platforms),
        target.python_version,
        f"pyc={compiled}",
        f"stripped={stripped}",
    ):
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()


def python_for(version: str) -> str | None:
    """An interpreter of ``version`` to compile bytecode with (.pyc files are version-specific)."""
    if f"{sys.version_info.major}.{sys.version_info.minor}" == version:
        return sys.executable
    candidates: list[list[str]] = []
    if explicit := os.environ.get("BATON_LAYER_PYTHON"):
        candidates.append([explicit])
    if found := shutil.which(f"python{version}"):
        candidates.append([found])
    if shutil.which("pyenv"):
        # pyenv shims only answer for the selected version: ask pyenv where each one lives.
        listed = _run_quiet(["pyenv", "versions", "--bare"]) or ""
        for name in listed.split():
            if name == version or name.startswith(f"{version}."):
                prefix = (_run_quiet(["pyenv", "prefix", name]) or "").strip()
                if prefix:
                    candidates.append([str(Path(prefix) / "bin" / f"python{version}")])
    uv = Path(sys.executable).with_name("uv")
    if uv.exists() and (found_uv := (_run_quiet([str(uv), "python", "find", version]) or "")):
        candidates.append([found_uv.strip()])
    check = "import sys; print('%d.%d' % sys.version_info[:2])"
    for cmd in candidates:
        if (_run_quiet([*cmd, "-c", check]) or "").strip() == version:
            return cmd[0]
    return None


def _run_quiet(cmd: list[str]) -> str | None:
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    except OSError:
        return None
    return done.stdout if done.returncode == 0 else None


def _target_args(target: Target) -> list[str]:
    return [
        *[arg for platform in target.platforms for arg in ("--platform", platform)],
        "--only-binary=:all:",
        "--python-version",
        target.python_version,
        "--implementation",
        "cp",
        "--no-deps",
    ]


def missing_wheels(target: Target) -> list[Requirement]:
    """The pinned requirements that have no wheel in ``target``'s wheelhouse."""
    have: set[tuple[str, Version]] = set()
    for wheel in wheelhouse(target).glob("*.whl"):
        with contextlib.suppress(InvalidWheelFilename):
            name, version, _, _ = parse_wheel_filename(wheel.name)
            have.add((name, version))
    return [
        r
        for r in pinned_requirements()
        if (canonicalize_name(r.name), Version(next(iter(r.specifier)).version)) not in have
    ]


def fill_wheelhouse(target: Target) -> None:
    """Download the pinned wheels the wheelhouse lacks (all of them the first time)."""
    missing = missing_wheels(target)
    house = wheelhouse(target)
    if not missing:
        log(f"all {len(pinned_requirements())} pinned wheels in the cache ({house})")
        return
    house.mkdir(parents=True, exist_ok=True)
    platforms = " + ".join(target.platforms)
    log(f"downloading {len(missing)} pinned wheels for {platforms} into {house}")
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--disable-pip-version-check",
        "--progress-bar",
        "off",
        "--dest",
        str(house),
        *_target_args(target),
        "--cache-dir",
        str(cache_dir() / "http"),
        *(str(r) for r in missing),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode == 0:
        return
    raise OfflineError(download_failure(target, f"{done.stdout}\n{done.stderr}", done.returncode))


UNREACHABLE = (
    "NewConnectionError",
    "Failed to establish a new connection",
    "Could not fetch URL",
    "ConnectTimeout",
    "Temporary failure in name resolution",
    "Name or service not known",
    "Max retries exceeded",
)


def reachable(url: str) -> bool:
    """Whether ``url`` answers at all (any HTTP status counts): pip says "no matching
    distribution" alike for a pin that does not exist and for an index it could not reach."""
    try:
        urllib.request.urlopen(url, timeout=10).close()
    except urllib.error.HTTPError:
        return True
    except (OSError, ValueError):
        return False
    return True


def download_failure(target: Target, output: str, status: int) -> str:
    """What a failed ``pip download`` means, and what to do: one message, no traceback."""
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    still = ", ".join(str(r) for r in missing_wheels(target))
    house = wheelhouse(target)
    index = os.environ.get("PIP_INDEX_URL") or "https://pypi.org/simple"
    if any(mark in ln for ln in lines for mark in UNREACHABLE) or not reachable(index):
        why = f"the package index ({index}) cannot be reached"
    else:
        errors = [ln for ln in lines if ln.startswith("ERROR")]
        why = f"pip said: {(errors or lines or [f'exit status {status}'])[-1]}"
    return (
        f"layer build: cannot download the wheels the Lambda layer needs: {why}.\n"
        f"  Not in the wheel cache ({house}): {still}.\n"
        "  Run `make layer` (or `make synth`) once with access to PyPI, or set PIP_INDEX_URL to "
        "a mirror that has them; later builds, from any checkout, take them from the cache and "
        "need no network."
    )


def pip_install(target: Target, site: Path) -> None:
    fill_wheelhouse(target)
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--disable-pip-version-check",
        "--quiet",
        "--target",
        str(site),
        *_target_args(target),
        "--no-compile",
        "--no-index",
        "--find-links",
        str(wheelhouse(target)),
        "--requirement",
        str(REQUIREMENTS),
    ]
    log(f"installing {len(pinned_requirements())} pinned wheels from the cache")
    subprocess.run(cmd, check=True)
    for name in PRUNE_DIRS:
        shutil.rmtree(site / name, ignore_errors=True)


def drop_unused(site: Path) -> None:
    """Remove what no function imports (UNUSED, type stubs), pip's records and the long
    descriptions of METADATA files; then check no module left names a dropped package."""
    before = _tree_bytes(site)
    for relative in UNUSED:
        path = site / relative
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
        else:  # a pin changed the distribution: say so rather than drop nothing silently
            raise SystemExit(f"layer: {relative} (in UNUSED) is not in the layer any more")
    for pattern in UNUSED_PATTERNS:
        for path in site.rglob(pattern):
            path.unlink()
    for info in site.glob("*.dist-info"):
        for name in PIP_RECORDS:
            (info / name).unlink(missing_ok=True)
        metadata = info / "METADATA"
        if metadata.is_file():
            metadata.write_bytes(metadata_headers(metadata.read_bytes()))
    check_unreferenced(site)
    log(f"dropped what no function imports: {(before - _tree_bytes(site)) / 1e6:.1f} MB")


def metadata_headers(data: bytes) -> bytes:
    """A METADATA file without its body (the long description, often the whole README and
    changelog): the headers are what importlib.metadata and the closure check read."""
    normalized = data.replace(b"\r\n", b"\n")
    head, sep, _ = normalized.partition(b"\n\n")
    return head + b"\n" if sep else normalized


def check_unreferenced(site: Path) -> None:
    """Fail when a module left in the layer names a package UNUSED dropped (a new release that
    starts to import it)."""
    dropped = [
        relative.replace("/", ".")
        for relative in UNUSED
        if not Path(relative).suffix  # packages (folders), not data files
    ]
    pattern = re.compile(r"\b(" + "|".join(re.escape(d) for d in dropped) + r")\b")
    found = sorted(
        f"{path.relative_to(site)} names {match.group(1)}"
        for path in site.rglob("*.py")
        if (match := pattern.search(path.read_text("utf-8", errors="replace")))
    )
    if found:
        raise SystemExit("layer: a dropped package is still named:\n  " + "\n  ".join(found))


def _tree_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def pinned_requirements() -> list[Requirement]:
    lines = (line.split("#", 1)[0].strip() for line in REQUIREMENTS.read_text().splitlines())
    reqs = [Requirement(line) for line in lines if line]
    unpinned = [str(r) for r in reqs if not str(r.specifier).startswith("==")]
    if unpinned:
        raise SystemExit(f"layers/requirements.txt: pin with == (found {', '.join(unpinned)})")
    return reqs


def installed(site: Path) -> Iterator[Distribution]:
    for info in sorted(site.glob("*.dist-info")):
        yield PathDistribution(info)


def check_closure(site: Path, target: Target) -> None:
    """Fail when an installed distribution requires something missing or at a wrong version."""
    versions = {canonicalize_name(d.metadata["Name"]): d.version for d in installed(site)}
    problems: list[str] = []
    for dist in installed(site):
        for line in dist.requires or []:
            req = Requirement(line)
            if req.marker is not None and not req.marker.evaluate(target.marker_env):
                continue
            name = canonicalize_name(req.name)
            if name in RUNTIME_PROVIDED:
                continue
            have = versions.get(name)
            if have is None:
                problems.append(f"{dist.metadata['Name']} needs {req}: not pinned")
            elif not req.specifier.contains(have, prereleases=True):
                problems.append(f"{dist.metadata['Name']} needs {req}: pinned {have}")
    if problems:
        raise SystemExit("layer dependency closure is incomplete:\n  " + "\n  ".join(problems))
    log(f"closure ok: {len(versions)} distributions, runtime provides boto3/botocore")


def stripper(target: Target) -> list[str] | None:
    """A strip command that reads the target's ELF files: llvm-strip reads every architecture,
    GNU strip only its host's (so it is tried on a same-architecture machine only)."""
    for tool in ("llvm-strip", f"{target.machine}-linux-gnu-strip"):
        if shutil.which(tool):
            return [tool, "--strip-debug"]
    if os.uname().machine == target.machine and shutil.which("strip"):
        return ["strip", "--strip-debug"]
    return None


def has_debug_sections(path: Path) -> bool:
    """Whether ``path`` is a little-endian ELF64 file with ``.debug_*`` sections (read from its
    section headers: a binary's code may well hold the string ".debug_info")."""
    data = path.read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return False
    shoff = int.from_bytes(data[0x28:0x30], "little")
    shentsize = int.from_bytes(data[0x3A:0x3C], "little")
    shnum = int.from_bytes(data[0x3C:0x3E], "little")
    shstrndx = int.from_bytes(data[0x3E:0x40], "little")
    if not shoff or shstrndx >= shnum or shoff + shnum * shentsize > len(data):
        return False

    def header(index: int) -> tuple[int, int, int]:
        at = shoff + index * shentsize
        name = int.from_bytes(data[at : at + 4], "little")
        offset = int.from_bytes(data[at + 0x18 : at + 0x20], "little")
        size = int.from_bytes(data[at + 0x20 : at + 0x28], "little")
        return name, offset, size

    _, names_at, names_size = header(shstrndx)
    names = data[names_at : names_at + names_size]
    return any(names[header(i)[0] :].startswith(b".debug_") for i in range(shnum))


def strip_binaries(command: list[str] | None, site: Path) -> None:
    """Drop the debug sections some wheels ship in their shared objects (QuickJS's 8 MB extension
    is 1.3 MB without them): the layer counts against Lambda's 250 MB and a cold start reads it.
    Only objects that have debug sections are touched, and only those sections go: rewriting an
    object auditwheel patched (psycopg's bundled libraries) breaks its segment alignment."""
    objects = sorted(
        p
        for p in site.rglob("*.so*")
        if p.is_file() and not p.is_symlink() and has_debug_sections(p)
    )
    if command is None:
        log("WARNING: no strip tool for the target's ELF files (llvm-strip); shipping debug info")
        return
    before = sum(p.stat().st_size for p in objects)
    for path in objects:
        done = subprocess.run([*command, str(path)], check=False, capture_output=True, text=True)
        if done.returncode != 0:
            log(f"WARNING: {command[0]} left {path.name} as it was: {done.stderr.strip()}")
    after = sum(p.stat().st_size for p in objects)
    log(
        f"stripped debug info from {len(objects)} shared objects: "
        f"{before / 1e6:.1f} -> {after / 1e6:.1f} MB"
    )


def compile_tree(python: str | None, paths: Iterable[Path], site: Path) -> None:
    """Compile to unchecked-hash .pyc with paths as Lambda sees them (/opt/python/...)."""
    todo = [str(p) for p in paths]
    if not todo:
        return
    if python is None:
        log("WARNING: no interpreter of the target Python version found; shipping without .pyc")
        log("         (cold starts import ~2x slower). Set BATON_LAYER_PYTHON to one.")
        return
    cmd = [
        python,
        "-m",
        "compileall",
        "-q",
        "-j",
        "0",
        "--invalidation-mode",
        "unchecked-hash",
        "-s",
        str(site),
        "-p",
        LAYER_MOUNT,
        *todo,
    ]
    # compileall's exit status is the only failure signal; a source that does not compile on
    # the target Python is a real problem (it would fail at import on Lambda too).
    subprocess.run(cmd, check=True, env={**os.environ, "PYTHONHASHSEED": "0"})


def package_files(root: Path) -> Iterator[Path]:
    """The files of ``root`` that go into the layer, in a stable order."""
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if path.is_file() and not any(part_matches(part) for part in relative.parts):
            yield path


def part_matches(part: str) -> bool:
    return any(Path(part).match(pattern) for pattern in IGNORED)


def package_digest(deps_stamp: str) -> str:
    digest = hashlib.sha256(deps_stamp.encode())
    for src in PACKAGE_SRCS:
        for path in package_files(src):
            digest.update(f"{src.name}/{path.relative_to(src)}".encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def refresh_package(site: Path, compiler: str | None, deps_stamp: str) -> None:
    """Copy ``baton`` and ``baton_lambda`` into the layer and compile them, unless the layer
    already has these very files."""
    dests = [site / src.name for src in PACKAGE_SRCS]
    stamp_file = site / PACKAGE_STAMP_NAME
    digest = package_digest(deps_stamp)
    current = stamp_file.exists() and stamp_file.read_text().strip() == digest
    if current and all(d.is_dir() for d in dests):
        log(f"baton packages unchanged (stamp {digest[:12]})")
        return
    for src, dest in zip(PACKAGE_SRCS, dests, strict=True):
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(src, dest, ignore=COPY_IGNORE)
        log(f"copied {src.relative_to(ROOT)} -> {dest}")
    compile_tree(compiler, dests, site)
    stamp_file.write_text(digest + "\n")


@contextlib.contextmanager
def build_lock(out: Path) -> Iterator[None]:
    """One build of ``out`` at a time (parallel test workers, two terminals)."""
    try:
        import fcntl
    except ImportError:  # not on POSIX: no lock, as before
        yield
        return
    locks = cache_dir().parent / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    name = hashlib.sha256(str(out).encode()).hexdigest()[:16]
    with open(locks / f"layer-{name}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def tree_sizes(root: Path) -> tuple[int, int, int]:
    """Files, bytes unzipped and bytes zipped (deflate, as the CDK asset zip)."""
    files = sorted(p for p in root.rglob("*") if p.is_file())
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in files:
            archive.write(path, path.relative_to(root.parent))
    return len(files), sum(p.stat().st_size for p in files), buffer.tell()


def build(target: Target, out: Path, *, report_size: bool = True) -> Path:
    with build_lock(out):
        return _build(target, out, report_size=report_size)


def _build(target: Target, out: Path, *, report_size: bool) -> Path:
    started = time.monotonic()
    site = out / "python"
    stamp_file = site / STAMP_NAME
    compiler = python_for(target.python_version)
    strip = stripper(target)
    stamp = deps_stamp(target, compiled=compiler is not None, stripped=strip is not None)
    pinned_requirements()  # validate pins before anything else
    if stamp_file.exists() and stamp_file.read_text().strip() == stamp:
        log(f"dependencies unchanged (stamp {stamp[:12]}), skipping pip")
    else:
        shutil.rmtree(site, ignore_errors=True)
        site.mkdir(parents=True)
        pip_install(target, site)
        check_closure(site, target)
        drop_unused(site)
        strip_binaries(strip, site)
        log(f"compiling dependencies with {compiler or 'nothing'}")
        compile_tree(compiler, [site], site)  # before the baton copy: dependencies only
        stamp_file.write_text(stamp + "\n")
    refresh_package(site, compiler, stamp)
    if report_size:
        count, raw, zipped = tree_sizes(site)
        log(
            f"layer: {count} files, {raw / 1e6:.1f} MB ({raw / 2**20:.1f} MiB) unzipped "
            f"(limit {SIZE_LIMIT_BYTES / 1e6:.0f} MB), {zipped / 1e6:.1f} MB zipped"
        )
    log(f"done in {time.monotonic() - started:.1f}s -> {site}")
    return site


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--arch", default="arm64", choices=sorted(ARCH_TO_MACHINE))
    parser.add_argument("--python-version", default="3.12", help="Lambda runtime's Python")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="layer folder (has python/)")
    parser.add_argument("--no-size", action="store_true", help="skip the size report (zipping)")
    args = parser.parse_args(argv)
    target = Target(machine=ARCH_TO_MACHINE[args.arch], python_version=args.python_version)
    build(target, args.out.resolve(), report_size=not args.no_size)
    return 0


if __name__ == "__main__":
    sys.exit(main())
