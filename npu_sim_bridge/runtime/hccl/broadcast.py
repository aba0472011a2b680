"""broadcast_global_variables: one op that overwrites every global variable with its value on the root rank."""

import tensorflow as tf

from npu_sim_bridge.runtime.hccl import collectives, groups


def broadcast_global_variables(root_rank, variables=None):
    """An op assigning to each global variable of the default graph its value on root_rank (a no-op with one rank)."""
    groups.check_group_rank(groups.WORLD_GROUP, root_rank, "root_rank")
    variables = tf.compat.v1.global_variables() if variables is None else list(variables)
    if groups.get_rank_size() == 1 or not variables:
        return tf.no_op(name="broadcast_global_variables")
    assigns = []
    with tf.name_scope("broadcast_global_variables"):
        for variable in variables:
            received = collectives.broadcast([variable], root_rank)[0]
            assigns.append(tf.compat.v1.assign(variable, received))
    return tf.group(assigns, name="broadcast_global_variables")
