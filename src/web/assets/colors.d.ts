// Types of colors.js (the page's colours), so TypeScript tests can import it.
type Rgb = readonly [number, number, number];

export declare const PALETTE: readonly Rgb[];
export declare function rgbToLab(rgb: Rgb): [number, number, number];
export declare function colorDistance(a: Rgb, b: Rgb): number;
export declare function cssOf(rgb: Rgb): string;
export declare class RequestPalette {
  update(requests: readonly { requestId: string; ageMs: number }[]): { rgb: Rgb; css: string }[];
  colorOf(requestId: string): { rgb: Rgb; css: string };
}
export declare const STATE_RGB: Readonly<
  Record<
    | 'free'
    | 'cached'
    | 'cachedDot'
    | 'reserved'
    | 'unowned'
    | 'sharedEdge'
    | 'crossHatch'
    | 'swappedHatch'
    | 'fromStore'
    | 'folded'
    | 'foldedMark',
    Rgb
  >
>;
export declare function overviewBrightness(fill: number): number;
