"""tf.contrib.opt.ScipyOptimizerInterface: minimize a TF1 graph's loss with scipy.optimize.minimize (needs scipy).

As in TensorFlow 1.15, scipy is imported only when minimize() runs, and a missing scipy is an error
that says to install it.
"""

import numpy as np
import tensorflow as tf

_V1 = tf.compat.v1


class ScipyOptimizerInterface:
    """Packs the variables into one vector; scipy's optimizer calls back into the Session for loss and gradients.

    equalities / inequalities: lists of scalar tensors kept == 0 / >= 0; var_to_bounds: {variable: (low, high)}.
    """

    def __init__(self, loss, var_list=None, equalities=None, inequalities=None, var_to_bounds=None,
                 method="L-BFGS-B", options=None, **optimizer_kwargs):
        self._loss = loss
        self._vars = list(var_list) if var_list is not None else _V1.trainable_variables()
        if not self._vars:
            raise ValueError("ScipyOptimizerInterface: no variables to optimize (var_list is empty and the graph has "
                             "no trainable variables)")
        self._equalities = list(equalities or [])
        self._inequalities = list(inequalities or [])
        self._method, self._options, self._kwargs = method, options, optimizer_kwargs
        self._sizes = [int(np.prod(var.shape.as_list())) for var in self._vars]
        self._packed = tf.concat([tf.reshape(var, [-1]) for var in self._vars], 0)
        self._loss_grad = self._pack_gradient(loss)
        self._constraint_grads = [self._pack_gradient(c) for c in self._equalities + self._inequalities]
        self._placeholders = [_V1.placeholder(var.dtype.base_dtype, var.shape) for var in self._vars]
        self._assign = tf.group(*[_V1.assign(var, value) for var, value in zip(self._vars, self._placeholders)])
        self._bounds = self._bounds_of(var_to_bounds or {})

    def _pack_gradient(self, tensor):
        grads = tf.gradients(tensor, self._vars)
        return tf.concat([tf.reshape(tf.zeros_like(var) if grad is None else tf.convert_to_tensor(grad), [-1])
                          for grad, var in zip(grads, self._vars)], 0)

    def _bounds_of(self, var_to_bounds):
        if not var_to_bounds:
            return None
        bounds = []
        for var, size in zip(self._vars, self._sizes):
            low, high = next((value for key, value in var_to_bounds.items() if key is var), (None, None))
            bounds.extend(zip(np.broadcast_to(low if low is not None else -np.inf, [size]),
                              np.broadcast_to(high if high is not None else np.inf, [size])))
        return [(None if np.isneginf(low) else low, None if np.isposinf(high) else high) for low, high in bounds]

    def _feed(self, vector):
        feed, offset = {}, 0
        for placeholder, var, size in zip(self._placeholders, self._vars, self._sizes):
            feed[placeholder] = vector[offset:offset + size].reshape(var.shape.as_list())
            offset += size
        return feed

    def minimize(self, session=None, feed_dict=None, fetches=None, step_callback=None, loss_callback=None,
                 **run_kwargs):
        """Run the optimizer; the variables end at its solution."""
        try:
            import scipy.optimize  # pylint: disable=import-outside-toplevel
        except ImportError as error:
            raise ImportError("tf.contrib.opt.ScipyOptimizerInterface needs scipy, which is not installed: "
                              "pip install scipy") from error
        session = session or _V1.get_default_session()
        if session is None:
            raise ValueError("ScipyOptimizerInterface.minimize: pass session= or call it inside `with tf.Session()`")
        feed_dict = dict(feed_dict or {})
        fetches = list(fetches or [])

        def evaluate(tensors, vector):
            session.run(self._assign, feed_dict=self._feed(vector))
            return session.run(tensors, feed_dict=feed_dict, **run_kwargs)

        def loss_and_grad(vector):
            loss, grad, *fetched = evaluate([self._loss, self._loss_grad, *fetches], vector)
            if loss_callback is not None:
                loss_callback(*fetched)
            return float(loss), np.asarray(grad, dtype=np.float64)

        constraints = []
        for index, tensor in enumerate(self._equalities + self._inequalities):
            kind = "eq" if index < len(self._equalities) else "ineq"
            grad = self._constraint_grads[index]
            constraints.append({"type": kind,
                                "fun": lambda v, t=tensor: float(evaluate(t, v)),
                                "jac": lambda v, g=grad: np.asarray(evaluate(g, v), dtype=np.float64)})
        start = np.asarray(session.run(self._packed), dtype=np.float64)
        result = scipy.optimize.minimize(
            loss_and_grad, start, jac=True, method=self._method, bounds=self._bounds,
            constraints=constraints or (), options=self._options,
            callback=(lambda vector: step_callback(vector)) if step_callback else None, **self._kwargs)
        session.run(self._assign, feed_dict=self._feed(result.x))
        return result
