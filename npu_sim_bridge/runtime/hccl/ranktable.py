"""Where this process stands among the ranks: RANK_ID / RANK_SIZE / DEVICE_ID / RANK_TABLE_FILE, and rank tables.

The adapter's launch scripts start one process per NPU with those variables; RANK_TABLE_FILE
names a JSON rank table in Ascend's format version 1.0:

    {"version": "1.0", "status": "completed", "server_count": "1",
     "server_list": [{"server_id": "127.0.0.1", "host_nic_ip": "reserve",
                      "device": [{"device_id": "0", "device_ip": "192.168.100.101", "rank_id": "0"}, ...]}]}

`server_id` is the host's address; each device entry is one rank. The simulation gives rank r a
TensorFlow gRPC server at `<its server_id>:<port base + r>`; the port base is NPU_SIM_PORT_BASE
(default 29600), the same on every host. Without RANK_TABLE_FILE all ranks are on 127.0.0.1.
"""

import dataclasses
import json
import os

from npu_sim_bridge.errors import NpuSimError

DEFAULT_PORT_BASE = 29600
PORT_BASE_ENV = "NPU_SIM_PORT_BASE"
LOCALHOST = "127.0.0.1"


class RankConfigError(NpuSimError, ValueError):
    """The rank environment or the rank table is inconsistent; the message names the variable or file."""


@dataclasses.dataclass(frozen=True)
class RankInfo:
    """This process's rank and the address of every rank."""

    rank_id: int
    rank_size: int
    device_id: int
    hosts: tuple  # host of each rank, by rank id
    port_base: int
    rank_table_file: str = None

    @property
    def local_ranks(self):
        """The ranks on this rank's host, in rank order."""
        return [rank for rank, host in enumerate(self.hosts) if host == self.hosts[self.rank_id]]

    @property
    def local_rank_id(self):
        return self.local_ranks.index(self.rank_id)

    @property
    def local_rank_size(self):
        return len(self.local_ranks)

    def address(self, rank):
        """host:port of the gRPC server of `rank`."""
        return f"{self.hosts[rank]}:{self.port_base + rank}"

    @property
    def distributed(self):
        return self.rank_size > 1


def _int_variable(environ, name, default=None, minimum=0):
    text = environ.get(name)
    if text is None or text.strip() == "":
        return default
    try:
        value = int(text.strip())
    except ValueError:
        raise RankConfigError(f"environment variable {name}={text!r} is not an integer") from None
    if value < minimum:
        raise RankConfigError(f"environment variable {name}={value} is invalid, it must be at least {minimum}")
    return value


def rank_info(environ=None):
    """The RankInfo the environment describes (rank 0 of 1 when RANK_SIZE is unset or 1)."""
    environ = os.environ if environ is None else environ
    size = _int_variable(environ, "RANK_SIZE", default=1, minimum=1)
    port_base = _int_variable(environ, PORT_BASE_ENV, default=DEFAULT_PORT_BASE, minimum=1)
    table_file = environ.get("RANK_TABLE_FILE") or None
    if size == 1 and table_file is None:
        rank_text = (environ.get("RANK_ID") or "").strip()
        if not (environ.get("RANK_SIZE") or "").strip() and rank_text not in ("", "0"):
            raise RankConfigError(
                f"RANK_ID is {rank_text!r} but RANK_SIZE is not set, so this process would run as rank 0 of 1; set "
                "RANK_SIZE to the number of ranks (and RANK_TABLE_FILE), or start the ranks with `npu-sim launch`")
        return RankInfo(0, 1, _int_variable(environ, "DEVICE_ID", default=0), (LOCALHOST,), port_base)
    rank = _int_variable(environ, "RANK_ID")
    if rank is None:
        raise RankConfigError(
            f"RANK_SIZE is {size} but RANK_ID is not set; set RANK_ID to this process's rank (0..{size - 1}) as the "
            "launch scripts do, or start the ranks with `npu-sim launch --nproc N script.py`")
    if rank >= size:
        raise RankConfigError(f"RANK_ID {rank} is outside RANK_SIZE {size}: it must be 0..{size - 1}")
    if table_file is not None:
        hosts = read_rank_table(table_file)
        if len(hosts) != size:
            raise RankConfigError(f"rank table {table_file} lists {len(hosts)} ranks but RANK_SIZE is {size}; "
                                  "make them agree")
    else:
        hosts = (LOCALHOST,) * size
    if port_base + size - 1 > 65535:
        raise RankConfigError(f"{PORT_BASE_ENV}={port_base} leaves no room for {size} ports below 65536")
    default_device = hosts[:rank + 1].count(hosts[rank]) - 1
    device = _int_variable(environ, "DEVICE_ID", default=default_device)
    return RankInfo(rank, size, device, tuple(hosts), port_base, table_file)


def read_rank_table(path):
    """The host (server_id) of each rank in a version 1.0 rank table, by rank id."""
    try:
        with open(path, encoding="utf-8") as handle:
            table = json.load(handle)
    except OSError as error:
        raise RankConfigError(f"rank table {path} (RANK_TABLE_FILE) cannot be read: {error.strerror}") from None
    except UnicodeDecodeError as error:
        raise RankConfigError(f"rank table {path} is not UTF-8 text (byte {error.start} is {error.object[error.start]:#04x}); "
                              "save it as UTF-8 JSON") from None
    except json.JSONDecodeError as error:
        raise RankConfigError(f"rank table {path} is not valid JSON: {error.msg} at line {error.lineno} "
                              f"column {error.colno}") from None
    servers = table.get("server_list") if isinstance(table, dict) else None
    if not isinstance(servers, list) or not servers:
        raise RankConfigError(f"rank table {path} has no server_list; it must be in the version 1.0 format "
                              '{"version": "1.0", "server_list": [{"server_id": ..., "device": [...]}]}')
    hosts = {}
    for index, server in enumerate(servers):
        where = f"rank table {path} server_list[{index}]"
        if not isinstance(server, dict) or not isinstance(server.get("server_id"), str) \
                or not isinstance(server.get("device"), list):
            raise RankConfigError(f"{where} needs a server_id string and a device list")
        for device in server["device"]:
            try:
                rank = int(device["rank_id"])
            except (KeyError, TypeError, ValueError):
                raise RankConfigError(f"{where} has a device without an integer rank_id: {device!r}") from None
            if rank in hosts:
                raise RankConfigError(f"rank table {path} lists rank_id {rank} twice")
            hosts[rank] = server["server_id"]
    if sorted(hosts) != list(range(len(hosts))):
        raise RankConfigError(f"rank table {path} has rank_ids {sorted(hosts)}; they must be 0..{len(hosts) - 1}")
    return tuple(hosts[rank] for rank in range(len(hosts)))


def make_rank_table(rank_size, server_id=LOCALHOST):
    """A version 1.0 rank table (a dict) with `rank_size` devices on one server."""
    devices = [{"device_id": str(rank), "device_ip": f"192.168.{100 + rank % 4}.{101 - rank // 4}",
                "rank_id": str(rank)} for rank in range(rank_size)]
    return {"version": "1.0", "status": "completed", "server_count": "1",
            "server_list": [{"server_id": server_id, "host_nic_ip": "reserve", "device": devices}]}


def ranks_of_server(path, server_id=None):
    """(server_id, [rank ids]) of one server of a rank table; server_id may be omitted when there is one server."""
    hosts = read_rank_table(path)
    servers = sorted(set(hosts), key=hosts.index)
    if server_id is None:
        if len(servers) > 1:
            raise RankConfigError(f"rank table {path} names {len(servers)} servers ({', '.join(servers)}); say which "
                                  "one this host is with --server-id")
        server_id = servers[0]
    elif server_id not in servers:
        raise RankConfigError(f"rank table {path} has no server {server_id!r}; its servers are {', '.join(servers)}")
    return server_id, [rank for rank, host in enumerate(hosts) if host == server_id]
