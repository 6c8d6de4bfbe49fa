"""Read, per vLLM sdist with a gRPC server, the HTTP front end's own flags that the gRPC server's parser does not define.

Prints the entries of pdd_operator.vllm.grpc_server.GRPC_REFUSED (flag -> first and last release read refusing it).
Usage: python -m dev.gen_vllm_grpc_flags [DIR of unpacked sdists: ``<release>/vllm/`` trees, default the download
cache :data:`dev.vllm_sdists.CACHE`].
"""
import ast
import sys
from pathlib import Path

from dev.vllm_sdists import CACHE, read_member, releases_under


def literals_in_add_argument(tree, within=None):
    out = set()
    for node in ast.walk(tree if within is None else within):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
            for a in node.args:
                if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("-"):
                    out.add(a.value)
    return out


def frontend(text):
    tree = ast.parse(text)
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


def refused(vllm_dir: Path) -> list[str] | None:
    """The front end's flags the gRPC server's parser of the release at ``vllm_dir`` lacks; ``None``: no gRPC server."""
    grpc = [m for m in ("entrypoints/launchers/grpc_server.py", "entrypoints/grpc_server.py") if (vllm_dir / m).exists()]
    if not grpc:
        return None
    gtree = ast.parse(read_member(vllm_dir, grpc[0]))
    main = next(n for n in gtree.body if isinstance(n, ast.FunctionDef) and n.name == "main")
    own = literals_in_add_argument(main)
    engine = literals_in_add_argument(ast.parse(read_member(vllm_dir, "engine/arg_utils.py")))
    cli = next(m for m in ("entrypoints/common/cli_args.py", "entrypoints/launchers/cli_args.py",
                           "entrypoints/openai/cli_args.py")
               if (vllm_dir / m).exists() and "def make_arg_parser" in read_member(vllm_dir, m))
    fr = frontend(read_member(vllm_dir, cli))
    parsed = engine | own
    # a flag the gRPC parser also defines, or a prefix of one of its flags (argparse abbreviations), is accepted
    return sorted(f for f in fr if f.startswith("--") and not any(g.startswith(f) for g in parsed))


def main(root: Path) -> None:
    res = {v: found for v, tree in releases_under(root) if (found := refused(tree)) is not None}
    releases = list(res)
    spans: dict = {}
    for v, flags in res.items():
        for f in flags:
            spans.setdefault(f, []).append(v)
    for f in sorted(spans):
        first, last = spans[f][0], spans[f][-1]
        assert spans[f] == releases[releases.index(first):releases.index(last) + 1], f  # one unbroken span
        tup = lambda x: "(" + ", ".join(x.split(".")[:3]) + ")"  # noqa: E731
        print(f'    "{f}": ({tup(first)}, {"None" if last == releases[-1] else tup(last)}),')


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else CACHE)
