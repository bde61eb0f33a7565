#!/usr/bin/env python3
"""Rooms only point down: fails on an #include from a lower room to a higher one.

usage: check_layering.py [SOURCE_DIR]   (default: this script's ../)

A room is a top-level folder of C++ code. ROOMS lists them lowest first (the
order the README's "Layout" gives); it follows the CMake link graph: each
room's libraries link only those of the rooms before it. A file in room R may
include "S/..." only when S is R or comes before R.

Test code is held to the same order, with one addition: a unit test beside its
code (foo_test.cc) may also include the test helpers in testing/ (or in a
room's own testing/ folder, such as rpc/testing/) and the fakes in
tests/fakes/. A production file never includes testing/, a room's testing/
folder or tests/.

The CMake targets are held to it too: a target a room's CMakeLists.txt defines
links only targets of its own room or lower ones, and no production target (a
library or executable outside testing/, tests/ and fuzz/ that is not a test)
links a target of those rooms.

All of gRPC is in one room, rpc/: no header outside it, and no production
file outside it, includes grpcpp/, grpc/ or a generated .grpc.pb.h, directly
or through the project's headers (the rooms above rpc/ see interfaces only).

Exits 1 listing every upward include (file:line, the include, both rooms), 2 if
a folder with C++ code is in no room (place it in ROOMS), 0 otherwise.
"""

import os
import re
import sys

# Lowest first. Rooms on one line do not include each other; the order between
# them is only the one this check holds them to.
ROOMS = [
    "proto",  # the .proto files and their generated code
    "common",  # Status helpers, Env, CRC, hashing, TFRecord framing, flags, trace
    "cloud",  # Cloud Storage Env, metadata server
    "config",  # the job config and the model spec
    "security",  # the job's certificates and token
    "data",  # dataset readers, batching, feature hashing
    "models",  # tensors, layers, the model builder
    "io",  # checkpoints, rows files, event files, PNG, the export format
    "onnx",  # ONNX import and export of models
    "export",  # checkpoint -> export version, ONNX files of checkpoints
    "role",  # role startup: flags, the model source, the process wrapper
    "ps_protocol",  # how any role reaches the ps
    "ps",  # shards, tables, optimizers, PsTask, the in-process ps
    "rpc",  # all of gRPC: the ps's service, the clients, channel security, proto conversions
    "ps_server",  # pstrain-ps: a PsTask served over gRPC
    "input",  # a job's input assembly: who a replica is, its input, the evaluation's input
    "worker",  # the training loop
    "chief",  # coordinator, checkpointer, job monitor
    "serving",  # predictor, TF Serving's REST API
    "launch",  # the launcher, GCE plan, supervisor
    "python",  # the Python module: pybind11 adapters over the rooms below
    "testing",  # test helpers: only test code includes these
    "tests",  # cross-process tests, fakes, benchmarks
    "fuzz",  # libFuzzer targets (the ps one with tests/' in-process ps)
]
TEST_ONLY_ROOMS = {"testing", "fuzz", "tests"}
# Folders with no C++ of their own.
NOT_ROOMS = {"deploy", "docs", "examples", "build"}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([A-Za-z0-9_]+)/')
SOURCE = re.compile(r"\.(h|hh|hpp|cc|cpp|inc|in)$")


def in_testing_folder(rel):
    """Whether `rel` (a path from the source root) is in a room's testing/ folder."""
    return "testing" in rel.split("/")[1:-1]


GRPC_ROOM = "rpc"
ANY_INCLUDE = re.compile(r'^\s*#\s*include\s+[<"]([^>"]+)[>"]')


def is_grpc_header(included):
    return (included.startswith("grpcpp/") or included.startswith("grpc/")
            or included.endswith(".grpc.pb.h"))


def check_grpc(root, sources):
    """Files outside GRPC_ROOM that reach gRPC: "file: a -> b -> grpc header" lines.

    `sources` maps each C++ file (path from root) to whether it is test code.
    Headers are held to the rule whoever includes them; of the other files,
    only production ones (tests of the room may use gRPC).
    """
    includes = {}
    for rel in sources:
        with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as src:
            includes[rel] = [m.group(1) for m in map(ANY_INCLUDE.match, src) if m]
    chain = {}

    def reach(rel, seen):
        if rel in chain:
            return chain[rel]
        chain[rel] = None  # a cycle ends here
        for inc in includes.get(rel, []):
            if is_grpc_header(inc):
                chain[rel] = [inc]
                return chain[rel]
        for inc in includes.get(rel, []):
            if inc in includes and inc not in seen:
                below = reach(inc, seen | {rel})
                if below:
                    chain[rel] = [inc] + below
                    return chain[rel]
        return None

    bad = []
    for rel, test_file in sorted(sources.items()):
        if rel.split("/")[0] == GRPC_ROOM:
            continue
        if test_file and not rel.endswith(".h"):
            continue
        found = reach(rel, frozenset())
        if found:
            bad.append(f"{rel}: gRPC outside {GRPC_ROOM}/: " + " -> ".join([rel] + found))
    return bad


def is_unit_test(path):
    name = os.path.basename(path)
    return re.search(r"_test\.(cc|h)$", name) is not None


CMAKE_CALL = re.compile(r"\b(add_library|add_executable|target_link_libraries|pstrain_test|pstrain_fuzzer)\s*\(([^()]*)\)", re.S)


def cmake_calls(root):
    """(room, file, call, [args]) for each call CMAKE_CALL names, in every room's CMakeLists.txt."""
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        top = rel_dir.split(os.sep)[0]
        if rel_dir == "." or top.startswith(".") or top.startswith("build") or top in NOT_ROOMS:
            dirnames[:] = [d for d in dirnames if not d.startswith(".") and not d.startswith("build")]
            continue
        if "CMakeLists.txt" not in filenames:
            continue
        path = os.path.join(dirpath, "CMakeLists.txt")
        with open(path, encoding="utf-8") as f:
            text = re.sub(r"#[^\n]*", "", f.read())
        for m in CMAKE_CALL.finditer(text):
            yield top, os.path.relpath(path, root), m.group(1), m.group(2).split()


def check_links(root, rank):
    room_of, is_test = {}, {}
    calls = list(cmake_calls(root))
    for top, cmake_file, call, args in calls:
        if call in ("add_library", "add_executable", "pstrain_test") and args:
            room_of[args[0]] = top
            is_test[args[0]] = (call == "pstrain_test" or top in TEST_ONLY_ROOMS
                                or args[0].endswith("_test") or in_testing_folder(cmake_file))
        elif call == "pstrain_fuzzer" and args:
            room_of[args[0] + "_fuzzer"] = top
            is_test[args[0] + "_fuzzer"] = True
    bad = []
    for top, path, call, args in calls:
        if call not in ("target_link_libraries", "pstrain_test", "pstrain_fuzzer") or not args:
            continue
        target = args[0] + ("_fuzzer" if call == "pstrain_fuzzer" else "")
        if target not in room_of or top not in rank:
            continue
        for lib in args[1:]:
            if lib not in room_of or room_of[lib] not in rank:
                continue
            if room_of[lib] == top:
                if is_test.get(lib) and not is_test[target]:
                    bad.append(f"{path}: production target {target} links {lib} (test code)")
                continue
            lib_room = room_of[lib]
            if is_test.get(lib) and not is_test[target] and lib_room not in TEST_ONLY_ROOMS:
                bad.append(f"{path}: production target {target} links {lib} (test code)")
            if lib_room in TEST_ONLY_ROOMS and not is_test[target]:
                bad.append(f"{path}: production target {target} links {lib} ({lib_room}/, test code)")
            elif rank[lib_room] > rank[top] and not (is_test[target] and lib_room in TEST_ONLY_ROOMS):
                bad.append(f"{path}: {target} ({top}/) links {lib} ({lib_room}/): upward")
    return bad


def main(argv):
    root = os.path.abspath(argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    rank = {room: i for i, room in enumerate(ROOMS)}
    upward = []
    unplaced = []
    sources = {}
    for top in sorted(os.listdir(root)):
        full = os.path.join(root, top)
        if not os.path.isdir(full) or top.startswith(".") or top in NOT_ROOMS:
            continue
        if top.startswith("build"):
            continue
        for dirpath, dirnames, filenames in os.walk(full):
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
            for f in sorted(filenames):
                if not SOURCE.search(f):
                    continue
                path = os.path.join(dirpath, f)
                rel = os.path.relpath(path, root)
                if top not in rank:
                    unplaced.append(rel)
                    continue
                test_file = top in TEST_ONLY_ROOMS or is_unit_test(f) or in_testing_folder(rel)
                sources[rel] = test_file
                with open(path, encoding="utf-8", errors="replace") as src:
                    for n, line in enumerate(src, 1):
                        m = INCLUDE.match(line)
                        if not m or m.group(1) not in rank:
                            continue  # a library's header (absl/, gtest/, ...)
                        target = m.group(1)
                        included = line.split('"')[1]
                        if in_testing_folder(included) and not test_file:
                            upward.append((rel, n, included, top, target, "production code includes test code"))
                            continue
                        if target == top:
                            continue
                        if test_file and (target == "testing" or included.startswith("tests/fakes/")
                                          or in_testing_folder(included)):
                            continue
                        if target in TEST_ONLY_ROOMS and not test_file:
                            upward.append((rel, n, included, top, target, "production code includes test code"))
                        elif rank[target] > rank[top]:
                            upward.append((rel, n, included, top, target, "upward"))
    for rel in unplaced:
        print(f"{rel}: folder {rel.split(os.sep)[0]}/ is in no room; place it in ROOMS "
              f"(tests/check_layering.py) and in the README's Layout")
    for rel, n, included, top, target, why in upward:
        print(f'{rel}:{n}: #include "{included}": {why} ({top}/ is below {target}/)'
              if why == "upward" else f'{rel}:{n}: #include "{included}": {why}')
    bad_links = check_links(root, rank)
    for line in bad_links:
        print(line)
    grpc_outside = check_grpc(root, sources)
    for line in grpc_outside:
        print(line)
    if grpc_outside:
        print(f"{len(grpc_outside)} file(s) outside {GRPC_ROOM}/ see gRPC: move the code into "
              f"{GRPC_ROOM}/, or give its header an interface without gRPC")
        return 1
    if upward or bad_links:
        print(f"{len(upward)} include(s) and {len(bad_links)} link(s) against the room order (lowest first): {' < '.join(ROOMS)}")
        return 1
    if unplaced:
        return 2
    print(f"rooms point down: {' < '.join(ROOMS)}; gRPC only in {GRPC_ROOM}/")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
