"""Writes a torch checkout-like overlay whose dynamic_rendezvous.py publishes the bootstrap
address every round: the change a torch developer would try for the stale MASTER_ADDR.

    PYTHON docs/examples/patch_dynamic_rendezvous.py OUT_DIR
    trainsim run scenarios/late_joiner_next_round.toml --torch PYTHON --torch-elastic-src OUT_DIR

Run it with the Python whose torch is patched: it copies that torch's own file and edits it.
"""

import os
import sys

import torch.distributed.elastic.rendezvous.dynamic_rendezvous as installed

OLD = """        if self._bootstrap_store_info is None or (
            rank == 0 and self._shared_tcp_store_server is None
        ):
            server_port = 0
            if rank == 0:
                self._shared_tcp_store_server = self._create_tcp_store_server(
                    self._this_node.addr, server_port
                )
                server_port = self._shared_tcp_store_server.port
"""

NEW = """        if True:  # publish and read the bootstrap address every round
            server_port = 0
            if rank == 0:
                if self._shared_tcp_store_server is None:
                    self._shared_tcp_store_server = self._create_tcp_store_server(
                        self._this_node.addr, server_port
                    )
                server_port = self._shared_tcp_store_server.port
"""


def main(out):
    with open(installed.__file__) as f:
        source = f.read()
    if OLD not in source:
        sys.exit("this torch's next_rendezvous differs from 2.15's; edit the copy by hand")
    target = os.path.join(out, "torch", "distributed", "elastic", "rendezvous")
    os.makedirs(target, exist_ok=True)
    with open(os.path.join(target, "dynamic_rendezvous.py"), "w") as f:
        f.write(source.replace(OLD, NEW))
    print(out)


if __name__ == "__main__":
    main(sys.argv[1])
