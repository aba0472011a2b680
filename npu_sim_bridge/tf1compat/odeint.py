"""tf.contrib.integrate.odeint: y(t) of dy/dt = func(y, t) at the times t, by adaptive Dormand-Prince steps.

The Runge-Kutta 5(4) pair of Dormand and Prince with error control as TensorFlow 1.15's 'dopri5':
a step is kept when the RMS of error / (atol + rtol * max(|y|, |y_new|)) is at most 1, and the next
step is scaled by safety * ratio^(-1/5), within [dfactor, ifactor]. The steps here end exactly on the
output times (TensorFlow 1.15 stepped past them and interpolated), so results agree with it within
the tolerances, not to the last bit. Built as TF1 graph ops (tf.while_loop); gradients flow through.
"""

import tensorflow as tf

_C = (0.0, 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1.0, 1.0)
_A = ((),
      (1 / 5,),
      (3 / 40, 9 / 40),
      (44 / 45, -56 / 15, 32 / 9),
      (19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729),
      (9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656),
      (35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84))
_B5 = (35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84, 0.0)
_B4 = (5179 / 57600, 0.0, 7571 / 16695, 393 / 640, -92097 / 339200, 187 / 2100, 1 / 40)
_OPTIONS = ("first_step", "safety", "ifactor", "dfactor", "max_num_steps")


def _step(func, y, t, dt):
    """One Dormand-Prince step from (y, t): (the 5th-order solution, its error estimate)."""
    stages = []
    for coefficients, c in zip(_A, _C):
        increment = y
        for a, k in zip(coefficients, stages):
            if a:
                increment = increment + dt * a * k
        stages.append(tf.cast(func(increment, t + c * dt), y.dtype))
    solution = y + dt * tf.add_n([b * k for b, k in zip(_B5, stages) if b])
    error = dt * tf.add_n([(b5 - b4) * k for b5, b4, k in zip(_B5, _B4, stages) if b5 != b4])
    return solution, error


def odeint(func, y0, t, rtol=1e-6, atol=1e-12, method=None, options=None, full_output=False, name=None):
    """y at each time of the 1-D t, shape [len(t), *y0.shape] (y[0] = y0); func(y, t) gives dy/dt.

    options: first_step, safety (0.9), ifactor (10.0), dfactor (0.2), max_num_steps (1000 per output
    interval; more fails when run, naming it). full_output: also {'num_func_evals': ...}.
    """
    if method not in (None, "dopri5"):
        raise ValueError(f"odeint: method {method!r} is invalid, it should be one of: dopri5")
    options = dict(options or {})
    unknown = set(options) - set(_OPTIONS)
    if unknown:
        raise ValueError(f"odeint: unknown options {sorted(unknown)}; the options are {', '.join(_OPTIONS)}")
    with tf.name_scope(name or "odeint"):
        y0 = tf.convert_to_tensor(y0)
        if not y0.dtype.is_floating:
            raise TypeError(f"odeint: y0 must be a float tensor, got {y0.dtype.name}")
        t = tf.cast(tf.convert_to_tensor(t), y0.dtype)
        if t.shape.rank != 1:
            raise ValueError(f"odeint: t must be a 1-D tensor of times, got shape {t.shape}")
        safety, ifactor, dfactor = (tf.constant(options.get(k, d), y0.dtype)
                                    for k, d in (("safety", 0.9), ("ifactor", 10.0), ("dfactor", 0.2)))
        max_steps = int(options.get("max_num_steps", 1000))
        first = options.get("first_step")
        dt0 = tf.cast(first, y0.dtype) if first is not None else (t[-1] - t[0]) / 100.0
        count = tf.shape(t)[0]

        def interval(i, y, dt, evals, results):
            target = t[i]

            def keep_going(now, y, dt, evals, steps):
                return now < target

            def advance(now, y, dt, evals, steps):
                check = tf.debugging.assert_less(steps, max_steps, message="odeint: max_num_steps exceeded between "
                                                 "two output times; raise options['max_num_steps'] or loosen rtol/atol")
                with tf.control_dependencies([check]):
                    h = tf.minimum(dt, target - now)
                new_y, error = _step(func, y, now, h)
                scale = atol + rtol * tf.maximum(tf.abs(y), tf.abs(new_y))
                ratio = tf.sqrt(tf.reduce_mean(tf.square(error / scale)))
                accept = ratio <= 1.0
                factor = tf.clip_by_value(safety * tf.pow(tf.maximum(ratio, 1e-10), -0.2), dfactor, ifactor)
                grown = tf.where(accept, tf.maximum(h, dt) * factor, h * factor)
                return (tf.where(accept, now + h, now), tf.where(accept, new_y, y), grown, evals + 6, steps + 1)

            _, y, dt, evals, _ = tf.while_loop(keep_going, advance, (t[i - 1], y, dt, evals, tf.constant(0)))
            return i + 1, y, dt, evals, results.write(i, y)

        results = tf.TensorArray(y0.dtype, size=count, element_shape=y0.shape).write(0, y0)
        _, _, _, evals, results = tf.while_loop(lambda i, *_: i < count, interval,
                                                (tf.constant(1), y0, dt0, tf.constant(0), results))
        solution = results.stack()
        return (solution, {"num_func_evals": evals}) if full_output else solution
