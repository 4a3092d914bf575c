"""The `strandline` command: one typer app, each command group in its own module."""

from __future__ import annotations

import sys
import traceback

import typer

# typer 0.29 vendors click; its UsageError is only reachable here (typer is pinned).
from typer._click.exceptions import UsageError

from strandline.cli import (
    acls,
    admin,
    broker,
    chaos,
    cluster,
    configs,
    console,
    demo,
    dump_log,
    groups,
    log_dirs,
    perf,
    rdkafka,
    service,
    sim,
    state_change_log,
    topics,
    transactions,
)

app = typer.Typer(
    name="strandline",
    help="Strandline: a Kafka-compatible replicated commit log. Add --verbose to any "
    "command for client-library log lines and tracebacks.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.command("broker")(broker.run_broker)
app.command("demo")(demo.run_demo)
app.command("reassign")(admin.reassign)
app.command("elect")(admin.elect)
app.command("verify-replicas")(admin.verify_replicas)
app.command("dump-log")(dump_log.dump_log)
app.command("topics")(topics.topics)
app.command("configs")(configs.configs)
app.command("acls")(acls.acls)
app.command("console")(console.console)
app.add_typer(cluster.app, name="cluster")
app.add_typer(groups.app, name="groups")
app.add_typer(log_dirs.app, name="log-dirs")
app.add_typer(sim.app, name="sim")
app.add_typer(chaos.app, name="chaos")
app.add_typer(state_change_log.app, name="state-change-log")
app.add_typer(perf.app, name="perf")
app.add_typer(transactions.app, name="transactions")
app.add_typer(service.app, name="service")


def _take_verbose(argv: list[str]) -> bool:
    """`--verbose` anywhere on the line (not `groups`' own --verbose, which shows member
    assignments): client-library log lines and tracebacks on stderr."""
    if argv[:1] == ["--verbose"]:
        del argv[0]
        return True
    if argv[:1] == ["groups"] or "--verbose" not in argv:
        return False
    argv.remove("--verbose")
    return True


# Kafka's perf tools take `--producer-props a=1 b=2` (one flag, several values).
MULTI_VALUE_FLAGS = ("--producer-props", "--consumer-props")


def _spread_multi_values(argv: list[str]) -> list[str]:
    """`--producer-props a=1 b=2` as typer reads it: `--producer-props a=1 --producer-props
    b=2`."""
    out: list[str] = []
    flag: str | None = None
    own_value = False
    for arg in argv:
        if arg in MULTI_VALUE_FLAGS:
            flag, own_value = arg, True
        elif own_value:
            own_value = False
        elif flag is not None and not arg.startswith("-") and "=" in arg:
            out.append(flag)
        else:
            flag = None
        out.append(arg)
    return out


def main() -> None:
    """The command line. A bad flag or a missing argument is one line, as Kafka's tools
    print it, not a usage box; --help still shows the whole usage. Anything a tool did
    not foresee is one line too (the traceback with --verbose)."""
    argv = _spread_multi_values(sys.argv[1:])
    if argv[:1] == ["log-dirs"] and "--describe" in argv:
        # kafka-log-dirs.sh --describe: `log-dirs describe` printing Kafka's lines.
        argv.remove("--describe")
        argv[1:1] = ["describe"] if "--output" in argv else ["describe", "--output", "kafka"]
    verbose = _take_verbose(argv)
    rdkafka.set_verbose(verbose)
    try:
        code = app(args=argv, standalone_mode=False)
    except UsageError as e:
        command = e.ctx.command_path if e.ctx is not None else "strandline"
        print(f"error: {e.format_message()} (see {command} --help)", file=sys.stderr)
        sys.exit(e.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        sys.exit(130 if sys.exc_info()[0] is KeyboardInterrupt else 1)
    except rdkafka.ClientError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
    except Exception as e:  # the last line of defence, reported in one line
        if verbose:
            traceback.print_exc()
        name = type(e).__name__
        print(f"error: {name}: {e} (run with --verbose for details)", file=sys.stderr)
        sys.exit(1)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
