// Types of colors.js (the page's colours), so TypeScript tests can import it.
type Rgb = readonly [number, number, number];

export declare function requestColor(requestId: string): { rgb: Rgb; css: string };
export declare const STATE_RGB: Readonly<
  Record<'free' | 'cached' | 'cachedDot' | 'reserved' | 'unowned' | 'sharedEdge' | 'swappedHatch' | 'fromStore', Rgb>
>;
export declare const OVERVIEW_RGB: readonly Rgb[];
export declare function overviewBrightness(fill: number): number;
export declare function cssOf(rgb: Rgb): string;
