"""tf.contrib.training.HParams: named hyperparameters with fixed types, parsed from strings or JSON."""

import json
import re

_PARAM_RE = re.compile(r"\s*(?P<name>[A-Za-z_]\w*)\s*=\s*(?P<value>\[[^\]]*\]|[^,\[]*)\s*(?:,|$)")


def _convert(name, kind, text):
    text = text.strip()
    if kind is bool:
        lowered = text.lower()
        if lowered in ("true", "1"):
            return True
        if lowered in ("false", "0"):
            return False
        raise ValueError(f"HParams: could not parse {text!r} as a bool for hyperparameter {name!r} (true/false)")
    try:
        return kind(text)
    except ValueError:
        raise ValueError(f"HParams: could not parse {text!r} as {kind.__name__} for hyperparameter {name!r}") from None


class HParams:
    """tf.contrib.training.HParams: named hyperparameters with fixed types, `parse("a=1,b=[1,2]")`, JSON, values()."""

    def __init__(self, hparam_def=None, model_structure=None, **kwargs):
        if hparam_def is not None:
            raise ValueError("HParams(hparam_def=...) (a HParamDef proto) is not supported; pass keyword arguments")
        self._hparam_types = {}
        self._model_structure = model_structure
        for name, value in kwargs.items():
            self.add_hparam(name, value)

    def add_hparam(self, name, value):
        """Add hyperparameter `name` with `value` (its type, or its items' type for a list, is fixed)."""
        if getattr(self, name, None) is not None:
            raise ValueError(f"HParams: hyperparameter name {name!r} is reserved or already exists")
        if isinstance(value, (list, tuple)):
            if not value:
                raise ValueError(f"HParams: multi-valued hyperparameter {name!r} needs at least one value")
            self._hparam_types[name] = (type(value[0]), True)
        else:
            self._hparam_types[name] = (type(value), False)
        setattr(self, name, value)

    def set_hparam(self, name, value):
        """Set an existing hyperparameter, converting ints to floats where the type is float."""
        if name not in self._hparam_types:
            raise KeyError(f"HParams: unknown hyperparameter {name!r}; add it with add_hparam first")
        kind, is_list = self._hparam_types[name]
        if is_list:
            if not isinstance(value, (list, tuple)):
                raise ValueError(f"HParams: hyperparameter {name!r} is a list of {kind.__name__}, got {value!r}")
            setattr(self, name, [self._cast(name, kind, item) for item in value])
        else:
            if isinstance(value, (list, tuple)):
                raise ValueError(f"HParams: hyperparameter {name!r} is a single {kind.__name__}, "
                                 f"got the list {value!r}")
            setattr(self, name, self._cast(name, kind, value))

    @staticmethod
    def _cast(name, kind, value):
        if value is None or isinstance(value, kind) or kind is type(None):
            return value
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        raise ValueError(f"HParams: hyperparameter {name!r} is of type {kind.__name__}, got {value!r}")

    def del_hparam(self, name):
        """Remove a hyperparameter."""
        if name in self._hparam_types:
            delattr(self, name)
            del self._hparam_types[name]

    def parse(self, values):
        """Override values from a string "name=value,list=[1,2],..."; returns self."""
        position = 0
        values = values.strip()
        while position < len(values):
            match = _PARAM_RE.match(values, position)
            if match is None or match.end() == position:
                raise ValueError(f"HParams: could not parse {values[position:]!r}; expected name=value pairs "
                                 "separated by commas")
            position = match.end()
            name, text = match.group("name"), match.group("value")
            if name not in self._hparam_types:
                raise ValueError(f"HParams: unknown hyperparameter {name!r} in {values!r}")
            kind, is_list = self._hparam_types[name]
            if is_list:
                items = [item for item in text.strip().strip("[]").split(",") if item.strip()]
                self.set_hparam(name, [_convert(name, kind, item) for item in items])
            else:
                self.set_hparam(name, _convert(name, kind, text))
        return self

    def override_from_dict(self, values_dict):
        """Set every hyperparameter named in `values_dict`; returns self."""
        for name, value in values_dict.items():
            self.set_hparam(name, value)
        return self

    def values(self):
        """{name: value} of every hyperparameter."""
        return {name: getattr(self, name) for name in self._hparam_types}

    def to_json(self, indent=None, separators=None, sort_keys=False):
        """The hyperparameters as a JSON object."""
        return json.dumps(self.values(), indent=indent, separators=separators, sort_keys=sort_keys)

    def parse_json(self, values_json):
        """Override values from a JSON object; returns self."""
        return self.override_from_dict(json.loads(values_json))

    def get(self, key, default=None):
        """The value of `key`, or `default` when there is no such hyperparameter."""
        return getattr(self, key) if key in self._hparam_types else default

    def set_model_structure(self, model_structure):
        self._model_structure = model_structure

    def get_model_structure(self):
        return self._model_structure

    def __contains__(self, key):
        return key in self._hparam_types

    def __str__(self):
        return str(sorted(self.values().items()))

    def __repr__(self):
        return f"{type(self).__name__}({self.__str__()})"
