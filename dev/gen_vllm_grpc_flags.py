"""Read, per vLLM sdist with a gRPC server, the HTTP front end's own flags that the gRPC server's parser does not define.

Prints the entries of pdd_operator.vllm.grpc_server.GRPC_REFUSED (flag -> first and last release read refusing it).
Usage: python dev/gen_vllm_grpc_flags.py [DIR of unpacked sdists, default /work/vllm-src].
"""
import ast
import os
import sys

ROOT = sys.argv[1] if len(sys.argv) > 1 else "/work/vllm-src"

def ver(v): return tuple(int(x) for x in v.split(".")[:3])

def literals_in_add_argument(tree, within=None):
    out = set()
    for node in ast.walk(tree if within is None else within):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
            for a in node.args:
                if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("-"):
                    out.add(a.value)
    return out

def frontend(path):
    tree = ast.parse(open(path).read())
    flags = set()
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name.endswith("FrontendArgs"):
            for st in node.body:
                if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and not st.target.id.startswith("_"):
                    flags.add("--" + st.target.id.replace("_", "-"))
            flags |= literals_in_add_argument(node)
        if isinstance(node, ast.FunctionDef) and node.name == "make_arg_parser":
            flags |= literals_in_add_argument(node)
    return flags

res = {}
for v in sorted(os.listdir(ROOT), key=ver):
    base = f"{ROOT}/{v}/vllm/entrypoints"
    grpc = [p for p in (f"{base}/launchers/grpc_server.py", f"{base}/grpc_server.py") if os.path.exists(p)]
    if not grpc:
        continue
    gtree = ast.parse(open(grpc[0]).read())
    main = next(n for n in gtree.body if isinstance(n, ast.FunctionDef) and n.name == "main")
    own = literals_in_add_argument(main)
    engine = literals_in_add_argument(ast.parse(open(f"{ROOT}/{v}/vllm/engine/arg_utils.py").read()))
    cli = next(p for p in (f"{base}/common/cli_args.py", f"{base}/launchers/cli_args.py", f"{base}/openai/cli_args.py")
               if os.path.exists(p) and "def make_arg_parser" in open(p).read())
    fr = frontend(cli)
    parsed = engine | own
    # a flag the gRPC parser also defines, or a prefix of one of its flags (argparse abbreviations), is accepted
    res[v] = sorted(f for f in fr if f.startswith("--") and not any(g.startswith(f) for g in parsed))

releases = list(res)
spans: dict = {}
for v, refused in res.items():
    for f in refused:
        spans.setdefault(f, []).append(v)
for f in sorted(spans):
    first, last = spans[f][0], spans[f][-1]
    assert spans[f] == releases[releases.index(first):releases.index(last) + 1], f  # one unbroken span
    tup = lambda x: "(" + ", ".join(x.split(".")[:3]) + ")"  # noqa: E731
    print(f'    "{f}": ({tup(first)}, {"None" if last == releases[-1] else tup(last)}),')
