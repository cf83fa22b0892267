"""Every method of the machinery that overrides one of a base class carries `@override`, as Lightning's own
strategies do: a reader sees at the `def` which methods are a library's hooks, and a type checker fails when a new
release renames or drops the method being overridden, instead of the override silently never being called."""

import importlib
import inspect
import pkgutil

import trainrig


def machinery_classes() -> list[type]:
    """Every class defined in a module of trainrig/ (importing each module, as `--help` and the launchers do)."""
    classes = []
    for found in pkgutil.walk_packages(trainrig.__path__, f"{trainrig.__name__}."):
        module = importlib.import_module(found.name)
        classes += [cls for _, cls in inspect.getmembers(module, inspect.isclass) if cls.__module__ == module.__name__]
    return classes


def overriding_methods(cls: type) -> dict[str, object]:
    """The functions `cls` defines whose names a base class (other than object) defines too; dunders left out, as
    Lightning leaves them."""
    found = {}
    for name, value in vars(cls).items():
        function = value.fget if isinstance(value, property) else getattr(value, "__func__", value)
        if not inspect.isfunction(function) or (name.startswith("__") and name.endswith("__")):
            continue
        if not function.__qualname__.startswith(f"{cls.__qualname__}."):
            continue  # written elsewhere, copied in by a metaclass (an Enum's `_generate_next_value_`)
        if any(name in vars(base) for base in cls.__mro__[1:] if base is not object):
            found[name] = function
    return found


def test_every_override_in_the_machinery_is_marked():
    unmarked = [
        f"{cls.__module__}.{cls.__qualname__}.{name}"
        for cls in machinery_classes()
        for name, function in overriding_methods(cls).items()
        if not getattr(function, "__override__", False)
    ]
    assert not unmarked, f"mark these with @override (from typing_extensions): {unmarked}"


def test_the_check_sees_an_unmarked_override():
    """The check itself: a method redefining its base's is found; a marked one and a new one are not reported."""
    from typing_extensions import override

    class Base:
        def hook(self) -> None: ...

        def other(self) -> None: ...

    class Child(Base):
        def hook(self) -> None: ...

        @override
        def other(self) -> None: ...

        def own(self) -> None: ...

    assert set(overriding_methods(Child)) == {"hook", "other"}
    assert not getattr(overriding_methods(Child)["hook"], "__override__", False)
    assert getattr(overriding_methods(Child)["other"], "__override__", False)
