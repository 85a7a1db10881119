"""Shared by the fault tests (test_bsp_run_safety.py, test_bsp_iv.py): a function that goes wrong at
its n-th call, and the negative density that makes a run fault."""


def nth_call(module, name, n, change):
    """Replace module.name by a wrapper whose call number ``n`` (from 0) goes through ``change``
    (called as ``change(orig, *args, **kwargs)``)."""
    orig = getattr(module, name)
    calls = []

    def wrapper(*a, **k):
        calls.append(1)
        return change(orig, *a, **k) if len(calls) == n + 1 else orig(*a, **k)
    return wrapper


def negative_rho(orig, *a, **k):
    """For dens.dens: the density with one x node negated (a negative-density fault, phase DENS)."""
    rho, PhiHat = orig(*a, **k)
    rho = rho.copy()
    rho[4] = -rho[4]
    return rho, PhiHat
