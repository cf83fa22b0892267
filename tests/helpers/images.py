"""Small generated stand-in images, as the image examples train on in the tests."""

from pathlib import Path


def small_images(shapes_root: Path | None) -> list[str]:
    return [
        *("--data.init_args.root", str(shapes_root), "--data.init_args.images_per_class", "12"),
        *(
            "--data.init_args.canvas_size",
            "32",
            "--data.init_args.num_workers",
            "0",
            "--data.init_args.batch_size",
            "8",
        ),
    ]
