"""The Kafka tools' layouts, checked line for line on fixed data against what Kafka's
printf formats produce (ConsumerGroupCommand.java, ToolsUtils.prettyPrintTable,
ConfigCommand.scala). The tool tests check the same lines against a real cluster."""

from __future__ import annotations

from strandline.cli.configs import Config, Entity
from strandline.cli.configs import kafka_lines as config_lines
from strandline.cli.groups_render import members_lines, offsets_lines, reset_lines, state_lines
from strandline.cli.kafka_text import check_output, pretty_table
from strandline.client.groups import GroupView, MemberView, PartitionRow
from strandline.types import TopicPartition

LONG_ID = "consumer-1-0123456789abcdef0123456789abcdef"


def view(**overrides: object) -> GroupView:
    fields: dict[str, object] = {
        "group": "g",
        "state": "Stable",
        "coordinator": (2, "127.0.0.1", 9093),
        "protocol_type": "consumer",
        "assignor": "range",
        "members": [
            MemberView(LONG_ID, None, "consumer-1", "/127.0.0.1", [TopicPartition("t", 0)])
        ],
        "rows": [
            PartitionRow(TopicPartition("t", 0), 3, 10, LONG_ID, "consumer-1", "/127.0.0.1"),
            PartitionRow(TopicPartition("a-longer-topic-name", 1), None, 4),
        ],
    }
    fields.update(overrides)
    return GroupView(**fields)  # type: ignore[arg-type]


def test_offsets_lines_are_kafkas_printf_columns() -> None:
    # "%-15s %-19s %-10s %-15s %-15s %-15s %-43s %-15s %s": group and host at their
    # 15 minimum, topic and consumer id as wide as their widest value.
    t, c = 19, len(LONG_ID)
    assert offsets_lines(view()) == [
        "",
        f"{'GROUP':<15} {'TOPIC':<{t}} {'PARTITION':<10} {'CURRENT-OFFSET':<15} "
        f"{'LOG-END-OFFSET':<15} {'LAG':<15} {'CONSUMER-ID':<{c}} {'HOST':<15} CLIENT-ID",
        f"{'g':<15} {'t':<{t}} {'0':<10} {'3':<15} {'10':<15} {'7':<15} {LONG_ID} "
        f"{'/127.0.0.1':<15} consumer-1",
        f"{'g':<15} {'a-longer-topic-name':<{t}} {'1':<10} {'-':<15} {'4':<15} {'-':<15} "
        f"{'-':<{c}} {'-':<15} -",
    ]


def test_members_lines_add_the_instance_id_column_only_when_a_member_has_one() -> None:
    c = len(LONG_ID)
    plain = members_lines(view(), verbose=True)
    assert plain == [
        "",
        f"{'GROUP':<15} {'CONSUMER-ID':<{c}} {'HOST':<15} {'CLIENT-ID':<15} "
        f"{'#PARTITIONS':<15} ASSIGNMENT",
        f"{'g':<15} {LONG_ID} {'/127.0.0.1':<15} {'consumer-1':<15} {'1':<15} t(0)",
    ]
    static = MemberView("m-1", "instance-a", "c", "/h", [])
    with_instance = members_lines(view(members=[static]), verbose=False)
    assert with_instance == [
        "",
        f"{'GROUP':<15} {'CONSUMER-ID':<15} {'GROUP-INSTANCE-ID':<17} {'HOST':<15} "
        f"{'CLIENT-ID':<15} {'#PARTITIONS':<15} ",
        f"{'g':<15} {'m-1':<15} {'instance-a':<17} {'/h':<15} {'c':<15} {'0':<15} ",
    ]


def test_state_lines_size_the_first_column_by_the_coordinator() -> None:
    coordinator = "a-rather-long-host.example.com:9093  (2)"
    lines = state_lines(view(coordinator=(2, "a-rather-long-host.example.com", 9093)))
    w = len(coordinator)
    assert lines == [
        "",
        f"{'GROUP':<{w}} {'COORDINATOR (ID)':<25} {'ASSIGNMENT-STRATEGY':<20} {'STATE':<15} "
        "#MEMBERS",
        f"{'g':<{w}} {coordinator:<25} {'range':<20} {'Stable':<15} 1",
    ]


def test_reset_lines_one_header_for_every_group() -> None:
    plans = [
        ("g1", "Empty", {TopicPartition("t", 1): 5, TopicPartition("t", 0): 2}),
        ("g2", "Empty", {TopicPartition("u", 0): 0}),
    ]
    assert reset_lines(plans) == [
        "",
        f"{'GROUP':<30} {'TOPIC':<30} {'PARTITION':<10} {'NEW-OFFSET':<15}",
        f"{'g1':<30} {'t':<30} {'0':<10} {'2':<15}",
        f"{'g1':<30} {'t':<30} {'1':<10} {'5':<15}",
        f"{'g2':<30} {'u':<30} {'0':<10} {'0':<15}",
    ]
    assert reset_lines([]) == [""]


def test_pretty_table_pads_every_cell_and_ends_each_with_a_tab() -> None:
    assert pretty_table(("Id", "State"), [("long-id", "Ongoing"), ("x", "")]) == [
        "Id     \tState  \t",
        "long-id\tOngoing\t",
        "x      \t       \t",
    ]


def test_config_lines_show_synonyms_and_hide_sensitive_values() -> None:
    configs = [
        Config(
            "retention.ms",
            "60000",
            1,
            False,
            False,
            (("retention.ms", "60000", 1), ("log.retention.hours", "168", 5)),
        ),
        Config("secret.key", "leaked?", 1, False, True, (("secret.key", None, 1),)),
        Config("segment.bytes", "1024", 5, False, False, ()),
    ]
    assert config_lines(Entity("topics", "orders"), configs, all_=False) == [
        "Dynamic configs for topic orders are:",
        "  retention.ms=60000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=60000, "
        "DEFAULT_CONFIG:log.retention.hours=168}",
        "  secret.key=null sensitive=true synonyms={DYNAMIC_TOPIC_CONFIG:secret.key=null}",
    ]
    everything = config_lines(Entity("brokers", ""), configs, all_=True)
    assert everything[0] == "Default configs for brokers in the cluster are:"
    assert everything[-1] == "  segment.bytes=1024 sensitive=false synonyms={}"


def test_output_values() -> None:
    assert check_output("kafka") is None and check_output("json") is None
    assert check_output("yaml") == "--output must be kafka, table or json, not 'yaml'"
