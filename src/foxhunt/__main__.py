"""`python -m foxhunt ...`: the same CLI as the `foxhunt` script."""

from foxhunt.cli import main

if __name__ == "__main__":
    main()
