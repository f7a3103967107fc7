"""llamactl's command line: the argparse tree, without the code that runs the commands."""

from __future__ import annotations

import argparse
import importlib

from llamad.cli import commands, exits

# Importing typing slows llamactl's start; annotations are never evaluated at run time.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

VERBS = {
    "start": "start instances and wait until they are running",
    "stop": "stop instances and wait until they have stopped",
    "restart": "restart instances and wait until a new process runs",
    "load": "start on-demand instances now, ahead of requests (same as start)",
    "unload": "stop on-demand instances now; the next request loads them (same as stop)",
}
SOCKET_HELP = "control socket (default: $LLAMAD_SOCKET, else the config's, else the default)"
CONFIG_HELP = "llamad.toml (default: $LLAMAD_CONFIG or ~/.config/llamad/llamad.toml)"
HOST_HELP = "talk to this peer instead: a name from [fleet] peers (or Tailscale), or a URL"
TOKEN_HELP = "bearer token file for --host (and for peers that have none of their own)"
CA_HELP = "CA certificate to trust for an https peer (e.g. its self-signed cert)"
DESCRIPTION = "Control a running llamad (or a fleet of them): status, start and stop, logs."


def _connection_options(
    parser: argparse.ArgumentParser, default: Any, config_only: bool = False
) -> None:
    # `config_only`: accepted (global options go on either side of any command) but only
    # --config is listed, for a command that talks to no llamad.
    def shown(text: str) -> str:
        return argparse.SUPPRESS if config_only else text

    parser.add_argument("--socket", metavar="PATH", default=default, help=shown(SOCKET_HELP))
    parser.add_argument("--config", metavar="FILE", default=default, help=CONFIG_HELP)
    parser.add_argument("--host", metavar="NAME", default=default, help=shown(HOST_HELP))
    parser.add_argument("--token-file", metavar="FILE", default=default, help=shown(TOKEN_HELP))
    parser.add_argument("--ca-file", metavar="FILE", default=default, help=shown(CA_HELP))


def _fleet(sub: Any, common: argparse.ArgumentParser) -> None:
    text = "every known llamad at once: [fleet] peers, Tailscale, mDNS"
    fleet = sub.add_parser("fleet", parents=[common], help=text, description=text)
    fleet.set_defaults(func=_fleet_status, json=False, timeout=None, discover=False)
    fleet.set_defaults(kind=exits.STATUS)
    fleet.set_defaults(mdns_interface=None)
    verbs = fleet.add_subparsers(dest="fleet_command", metavar="COMMAND")
    text = "status of every host; exit 3 if an instance is not running, 4 if a host is not"
    p = verbs.add_parser("status", parents=[common], help=text, description=text)
    p.add_argument("--json", action="store_true", help="hosts, their status and version skew")
    p.add_argument("--timeout", type=float, metavar="S", help="per host (default [fleet] or 2)")
    text = "also browse mDNS for ~1 s (always with [fleet] discover = true)"
    p.add_argument("--discover", action="store_true", help=text)
    text = "browse only on this address (default: [fleet] mdns_interface)"
    p.add_argument("--mdns-interface", metavar="ADDR", help=text)


def _export(sub: Any, common: argparse.ArgumentParser) -> None:
    text = "print what another system needs to reach llamad (kubernetes, litellm)"
    export = sub.add_parser("export", parents=[common], help=text, description=text)
    export.set_defaults(func=commands.export, kind=exits.ACTION)
    targets = export.add_subparsers(dest="target", metavar="TARGET", required=True)
    text = "a Service without a selector and its EndpointSlice: pods reach this llamad by name"
    p = targets.add_parser("kubernetes", parents=[common], help=text, description=text)
    text = "the IP the cluster reaches this machine at (default: [gateway] listen's host)"
    p.add_argument("--address", metavar="IP", help=text)
    p.add_argument("--port", type=int, metavar="N", help="the gateway's (default: the config's)")
    text = "the control API's, for the fleet (default: [daemon.remote] listen's; 0: none)"
    p.add_argument("--control-port", type=int, metavar="N", help=text)
    p.add_argument("--name", metavar="NAME", help="the Service's (default: llamad-HOSTNAME)")
    p.add_argument("--namespace", default="llm", metavar="NS", help="(default: llm)")
    text = "a LiteLLM proxy model_list: each model and alias the running llamad's gateway routes"
    p = targets.add_parser("litellm", parents=[common], help=text, description=text)
    text = "the gateway's /v1 URL as the proxy reaches it (default: from its listen address)"
    p.add_argument("--url", metavar="URL", help=text)
    text = "the proxy's environment variable holding a gateway key (default: LLAMAD_API_KEY)"
    p.add_argument("--key-env", default="LLAMAD_API_KEY", metavar="VAR", help=text)


def _fleet_status(args: argparse.Namespace) -> int:
    from llamad.cli.fleet_status import fleet_status  # threads and peers: only for this command

    return fleet_status(args)


def _top(args: argparse.Namespace) -> int:
    from llamad.cli.top import top  # termios and the screen: only for this command

    return top(args)


def _library(name: str) -> Any:
    def run(args: argparse.Namespace) -> int:
        from llamad.cli import library  # only for these commands

        return int(getattr(library, name)(args))

    return run


def _cache(args: argparse.Namespace) -> int:
    from llamad.cli.cache import cache  # only for this command

    return cache(args)


def build_parser(service: bool) -> argparse.ArgumentParser:
    """The llamactl parser; `service` pulls in llamad.service's sub-commands (may raise)."""
    parser = argparse.ArgumentParser(prog="llamactl", description=DESCRIPTION, epilog=exits.EPILOG)
    _connection_options(parser, None)
    parser.add_argument("--version", action="store_true", help="print versions and exit")
    parser.set_defaults(names=[], json=False, func=commands.status, kind=exits.STATUS)
    # Also accepted after the command. SUPPRESS keeps a sub-parser from resetting a value
    # given before it; these must be actions of their own, as parents share action objects.
    common = argparse.ArgumentParser(add_help=False)
    _connection_options(common, argparse.SUPPRESS)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", help="(default: status)")

    # validate reads a file and talks to no llamad: its help lists --config alone.
    config_only = argparse.ArgumentParser(add_help=False)
    _connection_options(config_only, argparse.SUPPRESS, config_only=True)

    def add(
        name: str, func: Any, text: str, parent: argparse.ArgumentParser = common
    ) -> argparse.ArgumentParser:
        p = sub.add_parser(name, parents=[parent], help=text, description=text)
        p.set_defaults(func=func, kind=exits.STATUS if name == "status" else exits.ACTION)
        return p

    p = add("status", commands.status, "show instances; exit 3 if one is not running")
    p.add_argument("names", nargs="*", metavar="NAME", help="only these instances")
    p.add_argument("--json", action="store_true", help="print llamad's status document")
    for verb, text in VERBS.items():
        p = add(verb, commands.control, text)
        p.add_argument("names", nargs="*", metavar="NAME")
        p.add_argument("--all", action="store_true", help="every configured instance")
        p.add_argument("--no-wait", action="store_true", help="return once llamad has the command")
        p.add_argument("--timeout", type=float, default=60.0, metavar="S", help="wait at most S s")
    p = add("reload", commands.reload, "re-read the config file and apply what changed")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p = add("logs", commands.logs, "print an instance's log (llama-server's output)")
    p.add_argument("name", metavar="NAME")
    p.add_argument("-n", "--lines", type=int, default=100, metavar="N", help="last N lines (100)")
    p.add_argument("-f", "--follow", action="store_true", help="keep printing new lines")
    p = add("top", _top, "the gateway's models live: state, load, speed, memory, usage by key")
    p.add_argument("--once", action="store_true", help="print one snapshot and exit")
    p.add_argument("--interval", type=float, default=1.0, metavar="S", help="redraw every S s")
    p.set_defaults(kind=exits.STATUS)  # a view: no daemon is exit 4, as for status
    p = add("models", _library("models"), "list the model library: name, source, size, quant")
    p.add_argument("--json", action="store_true", help="print the library as JSON")
    text = "download a model into the library (hf.co/USER/REPO:QUANT, USER/REPO:QUANT, llama3.2)"
    p = add("pull", _library("pull"), text)
    p.add_argument("ref", metavar="REF")
    text = "delete a model llamad pulled (unloaded first); never another program's files"
    p = add("rm", _library("rm"), text)
    p.add_argument("name", metavar="NAME")
    text = "list the saved prompt caches per model; `cache clear [MODEL]` removes them"
    p = add("cache", _cache, text)
    p.add_argument("words", nargs="*", metavar="clear [MODEL]")
    p.add_argument("--json", action="store_true", help="print the listing as JSON")
    add("validate", commands.validate, "check a config file; needs no running llamad", config_only)
    add("version", commands.version, "print llamactl's version, and llamad's if it is running")
    _fleet(sub, common)
    _export(sub, common)
    if service:
        # import_module consults sys.modules, so a stand-in registered there is honoured.
        service_module = importlib.import_module("llamad.service.install")

        service_module.register(sub, [common])
    else:
        # A placeholder keeps other commands from importing the service code; run() swaps it.
        sub.add_parser("service", add_help=False, help="run llamad under launchd or systemd")
    return parser
